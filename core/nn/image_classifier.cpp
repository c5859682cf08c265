#include "nn/image_classifier.h"

#include <torch/torch.h>

#include "io/errors.h"

namespace mumoe::nn {

ImageClassifierImpl::ImageClassifierImpl(BackboneConfig backbone, LayerConfig head)
    : backbone_config_(backbone) {
  backbone_config_.validate();
  if (head.input_dim != backbone_config_.feature_dim)
    throw UsageError("head input_dim " + std::to_string(head.input_dim) + " ≠ backbone feature_dim " +
                     std::to_string(backbone_config_.feature_dim));
  build_backbone();
  head_ = register_module("head", MuMoEBlock(std::move(head)));
}

ImageClassifierImpl::ImageClassifierImpl(BackboneConfig backbone, MoELayerConfig router_head)
    : backbone_config_(backbone) {
  backbone_config_.validate();
  if (router_head.input_dim != backbone_config_.feature_dim)
    throw UsageError("router head input_dim " + std::to_string(router_head.input_dim) + " ≠ backbone feature_dim " +
                     std::to_string(backbone_config_.feature_dim));
  build_backbone();
  router_head_ = register_module("head", MoELayer(std::move(router_head)));
}

void ImageClassifierImpl::build_backbone() {
  backbone_ = make_backbone(backbone_config_);
  register_module("backbone", backbone_);
}

torch::Tensor ImageClassifierImpl::prepare_images(const torch::Tensor& images) const {
  const auto& b = backbone_config_;
  if (b.preprocess.enabled) {
    if (images.dim() != 4 || (images.size(1) != b.in_channels && images.size(1) != 1))
      throw UsageError("image classifier expects images [B, 1 or " + std::to_string(b.in_channels) +
                       ", H, W], got " + c10::str(images.sizes()));
    return preprocess_images(images, b);
  }
  if (images.dim() != 4 || images.size(1) != b.in_channels || images.size(2) != b.image_size ||
      images.size(3) != b.image_size)
    throw UsageError("image classifier expects images [B, " + std::to_string(b.in_channels) + ", " +
                     std::to_string(b.image_size) + ", " + std::to_string(b.image_size) + "], got " +
                     c10::str(images.sizes()));
  return images;
}

torch::Tensor ImageClassifierImpl::backbone_features(const torch::Tensor& prepared) {
  return backbone_->forward(prepared);
}

torch::Tensor ImageClassifierImpl::features(const torch::Tensor& images) {
  return backbone_features(prepare_images(images));
}

BlockOutput ImageClassifierImpl::forward(const torch::Tensor& images, const ExpertAblation& ablation) {
  if (!has_router_head()) return head_->forward(features(images), ablation);
  auto out = router_head_->forward(features(images), ablation.experts_per_mode.empty()
                                                         ? std::vector<int64_t>{}
                                                         : ablation.experts_per_mode.front());
  return {out.output, {out.coefficients}, out.aux_loss, out.dropped_tokens};
}

}  // namespace mumoe::nn
