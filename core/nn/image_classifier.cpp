#include "nn/image_classifier.h"

#include <torch/torch.h>

#include "io/errors.h"

namespace mumoe::nn {

void BackboneConfig::validate() const {
  if (in_channels <= 0 || channels1 <= 0 || channels2 <= 0 || feature_dim <= 0)
    throw UsageError("backbone: channel counts and feature_dim must be positive");
  if (image_size <= 0 || image_size % 4 != 0)
    throw UsageError("backbone: image_size must be a positive multiple of 4, got " + std::to_string(image_size));
}

nlohmann::json to_json(const BackboneConfig& c) {
  return {{"type", "cnn2"},         {"in_channels", c.in_channels}, {"image_size", c.image_size},
          {"channels1", c.channels1}, {"channels2", c.channels2},   {"feature_dim", c.feature_dim}};
}

BackboneConfig backbone_config_from_json(const nlohmann::json& j) {
  BackboneConfig c;
  try {
    if (j.value("type", std::string("cnn2")) != "cnn2")
      throw UsageError("backbone type '" + j.value("type", std::string()) + "' is not supported (only cnn2)");
    c.in_channels = j.at("in_channels").get<int64_t>();
    c.image_size = j.at("image_size").get<int64_t>();
    c.channels1 = j.at("channels1").get<int64_t>();
    c.channels2 = j.at("channels2").get<int64_t>();
    c.feature_dim = j.at("feature_dim").get<int64_t>();
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(std::string("backbone configuration: ") + e.what());
  }
  c.validate();
  return c;
}

ImageClassifierImpl::ImageClassifierImpl(BackboneConfig backbone, LayerConfig head)
    : backbone_config_(backbone) {
  backbone_config_.validate();
  if (head.input_dim != backbone_config_.feature_dim)
    throw UsageError("head input_dim " + std::to_string(head.input_dim) + " ≠ backbone feature_dim " +
                     std::to_string(backbone_config_.feature_dim));
  namespace tnn = torch::nn;
  const auto& b = backbone_config_;
  const int64_t spatial = b.image_size / 4;
  backbone_ = tnn::Sequential(
      tnn::Conv2d(tnn::Conv2dOptions(b.in_channels, b.channels1, 3).padding(1)), tnn::BatchNorm2d(b.channels1),
      tnn::ReLU(), tnn::MaxPool2d(2),
      tnn::Conv2d(tnn::Conv2dOptions(b.channels1, b.channels2, 3).padding(1)), tnn::BatchNorm2d(b.channels2),
      tnn::ReLU(), tnn::MaxPool2d(2), tnn::Flatten(),
      tnn::Linear(b.channels2 * spatial * spatial, b.feature_dim), tnn::ReLU(), tnn::Dropout(0.25));
  register_module("backbone", backbone_);
  head_ = register_module("head", MuMoEBlock(std::move(head)));
}

torch::Tensor ImageClassifierImpl::features(const torch::Tensor& images) {
  const auto& b = backbone_config_;
  if (images.dim() != 4 || images.size(1) != b.in_channels || images.size(2) != b.image_size ||
      images.size(3) != b.image_size)
    throw UsageError("image classifier expects images [B, " + std::to_string(b.in_channels) + ", " +
                     std::to_string(b.image_size) + ", " + std::to_string(b.image_size) + "], got " +
                     c10::str(images.sizes()));
  return backbone_->forward(images);
}

BlockOutput ImageClassifierImpl::forward(const torch::Tensor& images, const ExpertAblation& ablation) {
  return head_->forward(features(images), ablation);
}

}  // namespace mumoe::nn
