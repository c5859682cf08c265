// One labelled data set, whatever it is made of: images (IDX, ImageFolder, CelebA, the biased
// benchmark) or precomputed features (feature files). Analysis, evaluation and training iterate
// over this type; `load_dataset` parses every data SPEC of the command line.
#pragma once

#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

#include "data/feature_data.h"
#include "data/image_data.h"

namespace mumoe::data {

struct Dataset {
  torch::Tensor images;      ///< [S, C, H, W] uint8 for image data held in memory, else undefined
  /// The images of a set that streams them (folder:, celeba:; data/image_stream.h), else null.
  std::shared_ptr<const ImageStream> image_stream;
  torch::Tensor features;    ///< [S, I] float32 for feature files, else undefined
  torch::Tensor labels;      ///< [S] int64
  torch::Tensor attributes;  ///< [S, K] int64 0/1, or undefined
  /// [S, T] int64 0/1: the binary targets of a multi-label task (attribute columns named
  /// target_names, chosen by with_targets), or undefined for a multi-class task.
  torch::Tensor targets;
  std::vector<std::string> target_names;
  std::vector<std::string> class_names;
  std::vector<std::string> attribute_names;
  std::string identity;  ///< the SPEC it was loaded from

  bool has_images() const { return images.defined() || image_stream != nullptr; }
  bool streams_images() const { return image_stream != nullptr; }
  /// Channels of every image (1 or 3); 0 without images.
  int64_t image_channels() const;
  /// Sample i's image, uint8 [C, H, W] (decoded from its file when the set streams). Throws
  /// UsageError without images, FileError for a file that cannot be decoded.
  torch::Tensor image(int64_t i) const;
  int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
  int64_t attribute_count() const { return attributes.defined() ? attributes.size(1) : 0; }
  bool multilabel() const { return targets.defined(); }
  /// Column of attribute `name`, or -1.
  int64_t attribute_index(const std::string& name) const;

  static Dataset from(LabelledImages images);
  static Dataset from(LabelledFeatures features);
};

/// "features:FILE" (a feature file) or any image SPEC of open_image_data (folder: and celeba:
/// stream their images). Throws UsageError for an unknown SPEC and FileError for unreadable data.
Dataset load_dataset(const std::string& spec);

/// `data` with its images decoded into `images` (for work that needs them all at once, e.g.
/// training); unchanged when they are there already. Throws FileError naming the first image
/// whose size differs from the first one's.
Dataset with_images_in_memory(Dataset data);

/// FILE of a "features:FILE" SPEC, "" for every other SPEC (the data file a command reads).
std::string feature_file_of(const std::string& spec);

/// `data` with the attribute columns `names` as multi-label targets (in that order). Throws
/// UsageError naming the data and the first attribute it lacks (and the ones it has).
Dataset with_targets(Dataset data, const std::vector<std::string>& names);

}  // namespace mumoe::data
