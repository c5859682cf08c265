// Images read on demand: the image data of a set too large to hold in memory (ImageNet's 50,000
// validation images are ~6 GB as RGB bytes at their stored sizes; CelebA's 202,599 are ~23 GB).
// A data set that streams lists its files when it opens and decodes only the samples a batch
// asks for, so memory stays flat however large the set is.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <string>

namespace mumoe::data {

class ImageStream {
 public:
  virtual ~ImageStream() = default;

  virtual int64_t size() const = 0;
  /// 1 (grey) or 3 (RGB), the same for every sample: decided by the first image when the data was
  /// opened; other images are converted to it.
  virtual int64_t channels() const = 0;
  /// Sample i as uint8 [channels, H, W] at the size stored in its file (sizes may differ between
  /// samples). Throws FileError naming the file when it cannot be decoded.
  virtual torch::Tensor image(int64_t i) const = 0;
  /// Where sample i is read from (its file), for messages.
  virtual std::string source(int64_t i) const = 0;
  /// Identifies the content for cache keys without reading it: the files' names, sizes and
  /// modification times (hashing the bytes of 6 GB of JPEGs would cost more than a cache saves).
  virtual const std::string& fingerprint() const = 0;
};

/// Turns one decoded sample (uint8 [C, H, W], its index) into the tensor a consumer needs; every
/// sample's result must have the same shape.
using ImageTransform = std::function<torch::Tensor(const torch::Tensor& image, int64_t sample)>;

/// Decodes the samples `indices` (int64 [n]) on one thread per physical core (nn/cpu_team.h),
/// each with a contiguous share, passes each through `transform` (called from those threads at
/// once: it must be thread-safe; its tensor ops run on one thread each) and returns the results
/// in order as one batch ([n, …], the first result's shape and dtype; another shape is an
/// std::invalid_argument). The exception of the first failing share propagates.
torch::Tensor decode_images(const ImageStream& stream, const torch::Tensor& indices, const ImageTransform& transform);

}  // namespace mumoe::data
