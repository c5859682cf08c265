// An image backbone (the demos' CNN, a timm ViT, a torchvision ResNet or an MLP-Mixer;
// backbone_config.h) with a μMoE head — or with one of the router study's sparse or soft MoE
// layers as the head (nn/moe_layer.h), routing groups of group_size images' features — or with a
// plain Linear head (the reference MLP-Mixer's head.2), whose experts all live in the backbone.
//
// Tensor keys: "backbone.…" for the backbone in its PyTorch layout, "head.…" for the μMoE head in
// the reference layout (so the head is also a μMoE layer named "head" in the manifest). Files in
// a user's own layout map their keys onto these when they load (model/classifier_file.h).
#pragma once

#include <nlohmann/json.hpp>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <memory>
#include <string>

#include "nn/backbone_config.h"
#include "nn/moe_layer.h"
#include "nn/mumoe_block.h"
#include "nn/vision_backbones.h"

namespace mumoe::nn {

/// The OpenMP team size that backbone_features() gives the calling thread while a backbone of
/// `kind` runs on `device`, 0 for none (the thread's team as it is): per_core_openmp_team()
/// (nn/cpu_team.h) for a convolutional backbone (SmallCnn, ResNet) on the CPU.
int backbone_openmp_team(BackboneKind kind, const torch::Device& device);

/// A plain Linear classifier head: features [B, input_dim] → logits [B, classes], no experts.
struct LinearHeadConfig {
  int64_t input_dim = 0;
  int64_t classes = 0;
};

class ImageClassifierImpl : public torch::nn::Module {
 public:
  /// head.input_dim must equal backbone.feature_dim; head.final_output_dim() is the class count.
  ImageClassifierImpl(BackboneConfig backbone, LayerConfig head);
  /// The same with a router layer as the head: router_head.input_dim must equal
  /// backbone.feature_dim; router_head.output_dim is the class count.
  ImageClassifierImpl(BackboneConfig backbone, MoELayerConfig router_head);
  /// The same with a plain Linear head ("head.weight" [classes, input_dim], "head.bias").
  ImageClassifierImpl(BackboneConfig backbone, LinearHeadConfig linear_head);

  /// images: float [B, C, H, W] in [0, 1] → the head's inputs [B, feature_dim]. With
  /// preprocessing (ViT, ResNet) any size and 1 or 3 channels; else exactly the backbone's shape.
  torch::Tensor features(const torch::Tensor& images);
  /// The first step of features(): checks `images` (as above) and applies the eval preprocessing
  /// (a no-op without one) → the backbone's input [B, in_channels, image_size, image_size].
  /// Images of different sizes are prepared one by one and stacked for backbone_features().
  torch::Tensor prepare_images(const torch::Tensor& images) const;
  /// The second step: prepared images → the head's inputs [B, feature_dim], on the OpenMP team
  /// of backbone_openmp_team().
  torch::Tensor backbone_features(const torch::Tensor& prepared);
  /// Logits [B, classes] and the head's coefficients (a router head: its one expert mode's
  /// combine weights per expert; ablation.experts_per_mode[0] removes experts from it).
  BlockOutput forward(const torch::Tensor& images, const ExpertAblation& ablation = {});
  /// The head alone on features [B, feature_dim]: logits and the head's coefficients (none for a
  /// Linear head, which takes no ablation).
  BlockOutput classify(const torch::Tensor& features, const ExpertAblation& ablation = {});
  /// The head's outputs: classes (or labels of a multi-label model).
  int64_t class_count() const;

  const BackboneConfig& backbone_config() const { return backbone_config_; }
  /// The μMoE head (an empty holder when the head is a router layer).
  MuMoEBlock head() const { return head_; }
  /// The router head (an empty holder when the head is a μMoE layer).
  MoELayer router_head() const { return router_head_; }
  bool has_router_head() const { return !router_head_.is_empty(); }
  /// The Linear head (an empty holder unless the head is one).
  torch::nn::Linear linear_head() const { return linear_head_; }
  bool has_linear_head() const { return !linear_head_.is_empty(); }
  /// The backbone module (its tokens() view for a ViT).
  std::shared_ptr<BackboneImpl> backbone() const { return backbone_; }

 private:
  BackboneConfig backbone_config_;
  std::shared_ptr<BackboneImpl> backbone_;
  /// Validates the backbone, checks the head's input width against its features, builds it.
  void build_backbone(int64_t head_input_dim, const std::string& head_kind);

  MuMoEBlock head_{nullptr};
  MoELayer router_head_{nullptr};
  torch::nn::Linear linear_head_{nullptr};
};
TORCH_MODULE(ImageClassifier);

/// An independent copy of `classifier` (same backbone and head, parameters and buffers) as
/// `dtype` on `device`, in eval mode: analysis runs such float64 copies.
ImageClassifier copy_image_classifier(const ImageClassifier& classifier, torch::Dtype dtype, const torch::Device& device);

}  // namespace mumoe::nn
