#include "data/image_data.h"

#include <torch/torch.h>

#include <filesystem>

#include "data/biased_fmnist.h"
#include "data/idx_file.h"
#ifdef MUMOE_WITH_OPENCV
#include "data/image_files.h"
#endif
#include "io/errors.h"

namespace mumoe::data {
namespace {

torch::Tensor to_tensor(const IdxArray& a) {
  auto t = torch::empty(a.shape, torch::kUInt8);
  if (!a.values.empty()) std::memcpy(t.data_ptr(), a.values.data(), a.values.size());  // no null memcpy
  return t;
}

std::string existing(const std::string& dir, const std::string& name) {
  for (const auto& candidate : {name + ".gz", name}) {
    const auto path = (std::filesystem::path(dir) / candidate).string();
    if (std::filesystem::exists(path)) return path;
  }
  throw FileError((std::filesystem::path(dir) / name).string() + "[.gz]", "missing");
}

std::vector<std::string> split_spec(const std::string& spec) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t colon; (colon = spec.find(':', start)) != std::string::npos; start = colon + 1)
    parts.push_back(spec.substr(start, colon - start));
  parts.push_back(spec.substr(start));
  return parts;
}

}  // namespace

const std::vector<std::string>& fashion_mnist_class_names() {
  static const std::vector<std::string> names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                 "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return names;
}

LabelledImages load_idx_pair(const std::string& images_path, const std::string& labels_path,
                             std::vector<std::string> class_names, std::string identity) {
  const auto images = read_idx(images_path);
  const auto labels = read_idx(labels_path);
  if (images.shape.size() != 3 && images.shape.size() != 4)
    throw FileError(images_path, "expected images of shape [S, H, W] or [S, C, H, W]");
  if (labels.shape.size() != 1) throw FileError(labels_path, "expected labels of shape [S]");
  if (images.shape[0] != labels.shape[0])
    throw FileError(images_path, std::to_string(images.shape[0]) + " images but " + labels_path + " has " +
                                     std::to_string(labels.shape[0]) + " labels");
  LabelledImages out;
  out.images = to_tensor(images);
  if (out.images.dim() == 3) out.images = out.images.unsqueeze(1);
  out.labels = to_tensor(labels).to(torch::kInt64);
  if (out.labels.numel() == 0) throw FileError(labels_path, "holds no samples");
  const int64_t max_label = out.labels.max().item<int64_t>();
  if (class_names.empty())
    for (int64_t c = 0; c <= max_label; ++c) class_names.push_back(std::to_string(c));
  if (max_label >= static_cast<int64_t>(class_names.size()))
    throw FileError(labels_path, "label " + std::to_string(max_label) + " but only " +
                                     std::to_string(class_names.size()) + " class names");
  out.class_names = std::move(class_names);
  out.identity = std::move(identity);
  return out;
}

LabelledImages load_idx_directory(const std::string& dir, const std::string& split,
                                  std::vector<std::string> class_names, std::string identity) {
  std::string stem;
  if (split == "train") stem = "train";
  else if (split == "test") stem = "t10k";
  else throw UsageError("unknown split '" + split + "' (expected train or test)");
  // Resolved one after the other so that a missing image file is reported before its labels.
  const auto images = existing(dir, stem + "-images-idx3-ubyte");
  const auto labels = existing(dir, stem + "-labels-idx1-ubyte");
  return load_idx_pair(images, labels, std::move(class_names), std::move(identity));
}

namespace {

// folder:DIR and celeba:DIR:SPLIT: photo sets, decoded with OpenCV — all at once, or each image
// when it is asked for (`streamed`).
bool is_photo_spec(const std::vector<std::string>& parts) {
  return (parts[0] == "folder" && parts.size() == 2) || (parts[0] == "celeba" && parts.size() == 3);
}

LabelledImages photo_set(const std::string& spec, const std::vector<std::string>& parts, bool streamed) {
#ifdef MUMOE_WITH_OPENCV
  auto out = parts[0] == "folder" ? (streamed ? open_image_folder(parts[1]) : load_image_folder(parts[1]))
                                  : (streamed ? open_celeba(parts[1], parts[2]) : load_celeba(parts[1], parts[2]));
  out.identity = spec;
  return out;
#else
  (void)parts;
  (void)streamed;
  throw UsageError("data SPEC '" + spec + "' needs OpenCV, which this build was configured without");
#endif
}

}  // namespace

LabelledImages load_image_data(const std::string& spec) {
  const auto parts = split_spec(spec);
  if (parts[0] == "fashion-mnist" && parts.size() == 2)
    return load_idx_directory(kFashionMnistDir, parts[1], fashion_mnist_class_names(), spec);
  if (parts[0] == "biased-fmnist" && parts.size() == 2) return load_biased_fmnist(parts[1]);
  if (parts[0] == "idx" && parts.size() == 3) return load_idx_directory(parts[1], parts[2], {}, spec);
  if (is_photo_spec(parts)) return photo_set(spec, parts, /*streamed=*/false);
  throw UsageError("unknown data SPEC '" + spec +
                   "' (expected fashion-mnist:train|test, biased-fmnist:train|test, idx:DIR:train|test, "
                   "folder:DIR or celeba:DIR:train|valid|test)");
}

LabelledImages open_image_data(const std::string& spec) {
  const auto parts = split_spec(spec);
  if (is_photo_spec(parts)) return photo_set(spec, parts, /*streamed=*/true);
  return load_image_data(spec);
}

torch::Tensor to_float_images(const torch::Tensor& images) { return images.to(torch::kFloat32) / 255.0; }

}  // namespace mumoe::data
