// One labelled data set, whatever it is made of: images (IDX, ImageFolder, CelebA, the biased
// benchmark) or precomputed features (feature files). Analysis, evaluation and training iterate
// over this type; `load_dataset` parses every data SPEC of the command line.
#pragma once

#include <torch/types.h>

#include <string>
#include <vector>

#include "data/feature_data.h"
#include "data/image_data.h"

namespace mumoe::data {

struct Dataset {
  torch::Tensor images;      ///< [S, C, H, W] uint8 for image data, else undefined
  torch::Tensor features;    ///< [S, I] float32 for feature files, else undefined
  torch::Tensor labels;      ///< [S] int64
  torch::Tensor attributes;  ///< [S, K] int64 0/1, or undefined
  std::vector<std::string> class_names;
  std::vector<std::string> attribute_names;
  std::string identity;  ///< the SPEC it was loaded from

  bool has_images() const { return images.defined(); }
  int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
  int64_t attribute_count() const { return attributes.defined() ? attributes.size(1) : 0; }

  static Dataset from(LabelledImages images);
  static Dataset from(LabelledFeatures features);
};

/// "features:FILE" (a feature file) or any image SPEC of load_image_data. Throws UsageError for
/// an unknown SPEC and FileError for unreadable data.
Dataset load_dataset(const std::string& spec);

}  // namespace mumoe::data
