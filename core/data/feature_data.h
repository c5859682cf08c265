// Precomputed features: how a user brings embeddings made elsewhere (CLIP, DINO, …) or the
// output of `mumoe features`. One safetensors file with
//   features    [S, I]  float (F32/F64/F16/BF16)
//   labels      [S]     integer class indices (I64, or whole-valued floats)
//   attributes  [S, K]  optional, 0/1 (any loadable dtype)
// and optional metadata "mumoe.class_names" / "mumoe.attribute_names" (JSON lists of strings).
#pragma once

#include <torch/types.h>

#include <string>
#include <vector>

namespace mumoe::data {

/// The most classes a data set may have. Labels are class indices, and every analysis holds a
/// table over classes (names, per-class accuracy, expert × class counts), so a label is checked
/// against this before anything is sized by it: a hostile label of 2^62 must not become 2^62
/// class names. ImageNet-21k has 21,841 classes.
inline constexpr int64_t kMaxClasses = 1'000'000;

struct LabelledFeatures {
  torch::Tensor features;    ///< [S, I] float32
  torch::Tensor labels;      ///< [S] int64
  torch::Tensor attributes;  ///< [S, K] int64 of 0/1, or undefined
  std::vector<std::string> class_names;
  std::vector<std::string> attribute_names;
  std::string identity;  ///< "features:PATH"
  int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
};

/// Reads and validates a feature file. Throws FileError naming the file and the problem
/// (not a regular file, no samples, missing tensor, wrong rank, count mismatch, NaN/inf,
/// non-integral, negative or too large labels — at least kMaxClasses, or without a class name
/// when names are given —, attributes other than 0/1, name lists of the wrong length).
LabelledFeatures load_feature_file(const std::string& path);

}  // namespace mumoe::data
