#include "nn/image_classifier.h"

#include <torch/torch.h>

#include "io/errors.h"
#include "nn/cpu_team.h"
#include "nn/module_state.h"

namespace mumoe::nn {

// Measured on this project's 2-core VM (2026-11-26, docs/BENCHMARKS.md "Convolutional backbones
// and decoding on every core"): a team of two took the demo CNN from 1,620–1,910 to 2,310–2,950
// images/s and ResNet-18 from 23–24 to 35–45; a ViT, whose time is in OpenBLAS's products, did
// not gain.
int backbone_openmp_team(BackboneKind kind, const torch::Device& device) {
  if ((kind != BackboneKind::SmallCnn && kind != BackboneKind::ResNet) || !device.is_cpu()) return 0;
  return per_core_openmp_team();
}

ImageClassifierImpl::ImageClassifierImpl(BackboneConfig backbone, LayerConfig head)
    : backbone_config_(backbone) {
  build_backbone(head.input_dim, "head");
  head_ = register_module("head", MuMoEBlock(std::move(head)));
}

ImageClassifierImpl::ImageClassifierImpl(BackboneConfig backbone, MoELayerConfig router_head)
    : backbone_config_(backbone) {
  build_backbone(router_head.input_dim, "router head");
  router_head_ = register_module("head", MoELayer(std::move(router_head)));
}

ImageClassifierImpl::ImageClassifierImpl(BackboneConfig backbone, LinearHeadConfig linear_head)
    : backbone_config_(backbone) {
  if (linear_head.classes <= 0) throw UsageError("a Linear head needs at least one class");
  build_backbone(linear_head.input_dim, "Linear head");
  linear_head_ = register_module("head", torch::nn::Linear(linear_head.input_dim, linear_head.classes));
}

void ImageClassifierImpl::build_backbone(int64_t head_input_dim, const std::string& head_kind) {
  backbone_config_.validate();
  if (head_input_dim != backbone_config_.feature_dim)
    throw UsageError(head_kind + " input_dim " + std::to_string(head_input_dim) + " ≠ backbone feature_dim " +
                     std::to_string(backbone_config_.feature_dim));
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
  const AtenTeam team(backbone_openmp_team(backbone_config_.kind, prepared.device()));
  return backbone_->forward(prepared);
}

torch::Tensor ImageClassifierImpl::features(const torch::Tensor& images) {
  return backbone_features(prepare_images(images));
}

BlockOutput ImageClassifierImpl::forward(const torch::Tensor& images, const ExpertAblation& ablation) {
  return classify(features(images), ablation);
}

BlockOutput ImageClassifierImpl::classify(const torch::Tensor& features, const ExpertAblation& ablation) {
  if (has_router_head()) return router_head_->forward_block(features, ablation);
  if (has_linear_head()) {
    if (!ablation.empty()) throw UsageError("the classifier's head is a plain Linear layer: it has no experts to ablate");
    BlockOutput out;
    out.output = linear_head_->forward(features);
    return out;
  }
  return head_->forward(features, ablation);
}

int64_t ImageClassifierImpl::class_count() const {
  if (has_router_head()) return router_head_->config().output_dim;
  if (has_linear_head()) return linear_head_->options.out_features();
  return head_->config().final_output_dim();
}

ImageClassifier copy_image_classifier(const ImageClassifier& original, torch::Dtype dtype, const torch::Device& device) {
  const auto& b = original->backbone_config();
  ImageClassifier copy = original->has_router_head() ? ImageClassifier(b, original->router_head()->config())
                         : original->has_linear_head()
                             ? ImageClassifier(b, LinearHeadConfig{b.feature_dim, original->class_count()})
                             : ImageClassifier(b, original->head()->config());
  copy->to(device, dtype);
  copy_state_for_eval(*original, *copy);
  return copy;
}

}  // namespace mumoe::nn
