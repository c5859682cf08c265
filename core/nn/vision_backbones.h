// The image backbones of nn/backbone_config.h as LibTorch modules, with parameter and buffer
// names equal to the PyTorch layouts they mirror (timm's VisionTransformer, torchvision's ResNet),
// so a user's state dict loads key for key; and the eval preprocessing that feeds them.
#pragma once

#include <torch/nn/module.h>

#include <memory>

#include "nn/backbone_config.h"

namespace mumoe::nn {

/// A backbone: preprocessed images [B, in_channels, image_size, image_size] → features
/// [B, feature_dim]. Eval-mode behaviour matches the PyTorch module it mirrors.
class BackboneImpl : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(const torch::Tensor& images) = 0;
};

/// The module for `config` (validated), randomly initialised; the caller loads weights.
std::shared_ptr<BackboneImpl> make_backbone(const BackboneConfig& config);

/// timm's eval transform on images already scaled to [0, 1] (float [B, C, H, W], any H and W):
/// grey → RGB when the backbone takes three channels, shorter side resized with antialiasing
/// (config.preprocess.interpolation, clamped to [0, 1] as an 8-bit image would be), centre crop,
/// normalisation. Returns `images` unchanged when config.preprocess is not enabled.
torch::Tensor preprocess_images(const torch::Tensor& images, const BackboneConfig& config);

}  // namespace mumoe::nn
