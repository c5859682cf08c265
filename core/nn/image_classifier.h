// A small CNN backbone with a μMoE head: the image classifier of the demo models.
//
// Tensor keys: "backbone.{k}.…" for the CNN (a Sequential), "head.…" for the μMoE head in the
// reference layout (so the head is also a μMoE layer named "head" in the manifest).
#pragma once

#include <nlohmann/json.hpp>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/pimpl.h>

#include "nn/mumoe_block.h"

namespace mumoe::nn {

struct BackboneConfig {
  int64_t in_channels = 1;
  int64_t image_size = 28;  ///< square images; must be divisible by 4
  int64_t channels1 = 32;
  int64_t channels2 = 64;
  int64_t feature_dim = 128;  ///< the μMoE head's input width I
  void validate() const;
};

nlohmann::json to_json(const BackboneConfig& config);
/// Throws UsageError naming the bad field.
BackboneConfig backbone_config_from_json(const nlohmann::json& json);

class ImageClassifierImpl : public torch::nn::Module {
 public:
  /// head.input_dim must equal backbone.feature_dim; head.final_output_dim() is the class count.
  ImageClassifierImpl(BackboneConfig backbone, LayerConfig head);

  /// images: float [B, C, H, W] in [0, 1] → the head's inputs [B, feature_dim].
  torch::Tensor features(const torch::Tensor& images);
  /// Logits [B, classes] and the head's coefficients.
  BlockOutput forward(const torch::Tensor& images, const ExpertAblation& ablation = {});

  const BackboneConfig& backbone_config() const { return backbone_config_; }
  MuMoEBlock head() const { return head_; }

 private:
  BackboneConfig backbone_config_;
  torch::nn::Sequential backbone_;
  MuMoEBlock head_{nullptr};
};
TORCH_MODULE(ImageClassifier);

}  // namespace mumoe::nn
