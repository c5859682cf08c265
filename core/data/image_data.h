// Labelled image data sets held in memory as uint8 tensors, and the data SPEC strings of the
// command line ("fashion-mnist:test", "idx:DIR:SPLIT").
#pragma once

#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

#include "data/image_stream.h"

namespace mumoe::data {

struct LabelledImages {
  torch::Tensor images;  ///< [S, C, H, W] uint8, or undefined when the images stream
  std::shared_ptr<const ImageStream> stream;  ///< the images, read on demand; null when in `images`
  torch::Tensor labels;  ///< [S] int64, in [0, class_names.size())
  std::vector<std::string> class_names;
  /// Optional named binary attributes per sample ([S, K] int64 of 0/1; undefined when none):
  /// they define subpopulations (e.g. CelebA's 40 attributes).
  torch::Tensor attributes;
  std::vector<std::string> attribute_names;
  std::string identity;  ///< the SPEC it was loaded from, e.g. "fashion-mnist:test"

  int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
};

/// Where Debian's dataset-fashion-mnist package puts the files.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
/// The 10 Fashion-MNIST class names, in label order.
const std::vector<std::string>& fashion_mnist_class_names();

/// Reads an IDX image file ([S,H,W] or [S,C,H,W]) and its IDX label file. Throws FileError when
/// either is missing or invalid, or when their counts differ (naming both files).
LabelledImages load_idx_pair(const std::string& images_path, const std::string& labels_path,
                             std::vector<std::string> class_names, std::string identity);

/// The MNIST-style files of `split` ("train" or "test") in `dir`, gzipped or raw:
/// train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz], t10k-… for test.
LabelledImages load_idx_directory(const std::string& dir, const std::string& split,
                                  std::vector<std::string> class_names, std::string identity);

/// Parses and loads an image data SPEC: "fashion-mnist:train|test", "biased-fmnist:train|test"
/// (data/biased_fmnist.h), "idx:DIR:train|test",
/// "folder:DIR" (ImageFolder), "celeba:DIR:train|valid|test" (the last two need OpenCV).
/// Throws UsageError for an unknown SPEC, FileError for unreadable data.
LabelledImages load_image_data(const std::string& spec);

/// Opens an image data SPEC like load_image_data, except that "folder:DIR" and
/// "celeba:DIR:SPLIT" only list and check their files (and decode the first image) and stream
/// the images on demand (data/image_stream.h); the other SPECs are loaded into memory.
LabelledImages open_image_data(const std::string& spec);

/// images uint8 [S,C,H,W] → float [S,C,H,W] in [0,1].
torch::Tensor to_float_images(const torch::Tensor& images);

}  // namespace mumoe::data
