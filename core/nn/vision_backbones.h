// The image backbones of nn/backbone_config.h as LibTorch modules, with parameter and buffer
// names equal to the PyTorch layouts they mirror (timm's VisionTransformer, torchvision's ResNet),
// so a user's state dict loads key for key; and the eval preprocessing that feeds them.
#pragma once

#include <torch/nn/module.h>

#include <memory>
#include <vector>

#include "nn/backbone_config.h"
#include "nn/expert_ablation.h"
#include "nn/moe_layer.h"
#include "nn/mumoe_block.h"

namespace mumoe::nn {

/// The steps of a transformer backbone one at a time, for analysing the expert MLP (μMoE block or
/// sparse/soft MoE layer) of one block (the stream block L's MLP reads is kept; ablating an expert
/// of block L re-runs only that MLP, the blocks after it and the pooling). forward(images) == pool(run_block(… run_block(embed(images), 0) …)).
class TokenBackbone {
 public:
  virtual ~TokenBackbone() = default;
  virtual int64_t depth() const = 0;
  /// Block `block`'s μMoE MLP, or an empty holder when its MLP is timm's fc1/fc2 or a router's.
  virtual MuMoEBlock mumoe_mlp(int64_t block) const = 0;
  /// Block `block`'s sparse or soft MoE MLP (nn/moe_layer.h), or an empty holder.
  virtual MoELayer router_mlp(int64_t block) const = 0;
  /// Prepared images → the residual stream entering block 0 [B, T, D] (patches, class token,
  /// positions, norm_pre).
  virtual torch::Tensor embed(const torch::Tensor& images) = 0;
  /// The stream after block `block`; `ablation` removes experts of its μMoE MLP (W_n := 0).
  /// run_block(x) == mlp_residual(attention_residual(x)).
  virtual torch::Tensor run_block(const torch::Tensor& stream, int64_t block, const ExpertAblation& ablation = {}) = 0;
  /// Block `block`'s first half: x + attention(norm1(x)), the stream its MLP reads.
  virtual torch::Tensor attention_residual(const torch::Tensor& stream, int64_t block) = 0;
  /// Block `block`'s second half on that stream: h + mlp(norm2(h)), token by token.
  virtual torch::Tensor mlp_residual(const torch::Tensor& attended, int64_t block, const ExpertAblation& ablation = {}) = 0;
  /// For a router MLP (MoELayer): token `token`'s stream after block `block`'s MLP half under R
  /// ablations at once, [B, R, D] from attended [B, T, D] and removed [R, N] (1 where row r
  /// removes expert n); an undefined `removed` means each expert removed alone (R = N, without
  /// an [N, N] mask). One routing pass serves every row: routing does not depend on the experts'
  /// outputs, so row r's MLP output is the token's output less its experts' contributions
  /// (MoELayerImpl::contributions_at_token). Throws UsageError for other MLPs.
  virtual torch::Tensor router_mlp_token_residuals(const torch::Tensor& attended, int64_t block, int64_t token,
                                                   const torch::Tensor& removed) = 0;
  /// The coefficients of block `block`'s μMoE MLP for attention_residual's output: per expert
  /// mode [B, T, N_e] (token 0 is the class token when the ViT has one).
  virtual std::vector<torch::Tensor> mlp_coefficients(const torch::Tensor& attended, int64_t block) = 0;
  /// mlp_residual(attended, block) and, into `coefficients`, what mlp_coefficients gives — from one
  /// pass, the gates computed once (what a forward that keeps every layer's coefficients needs).
  /// The default computes them twice; backbones with μMoE MLPs override it.
  virtual torch::Tensor mlp_residual_keeping(const torch::Tensor& attended, int64_t block,
                                             std::vector<torch::Tensor>& coefficients) {
    coefficients = mlp_coefficients(attended, block);
    return mlp_residual(attended, block);
  }
  /// The stream after the last block → features [B, D] (final norm, pooling, fc_norm).
  virtual torch::Tensor pool(const torch::Tensor& stream) = 0;
  /// True when pool() reads the class token alone (token 0): after the last block nothing else
  /// reaches the features.
  virtual bool pools_class_token() const = 0;
  /// Tokens before the patch tokens in the stream (1 with a class token, else 0).
  virtual int64_t prefix_tokens() const = 0;
  /// True when mlp_coefficients(…, block) has a row per token (prefix tokens, then patches); false
  /// when its rows are something else (a Mixer's token-mixing MLP: one row per channel).
  virtual bool mlp_rows_are_tokens(int64_t /*block*/) const { return true; }
};

/// A backbone: preprocessed images [B, in_channels, image_size, image_size] → features
/// [B, feature_dim]. Eval-mode behaviour matches the PyTorch module it mirrors.
class BackboneImpl : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(const torch::Tensor& images) = 0;
  /// The step-by-step view of a ViT or an MLP-Mixer; nullptr for other backbones.
  virtual TokenBackbone* tokens() { return nullptr; }
  /// The sum of the load-balancing losses its router MLPs computed in the last forward pass
  /// (undefined when none has one): what training adds for Softmax Token Choice MLPs.
  virtual torch::Tensor auxiliary_loss() const { return {}; }
};

/// The module for `config` (validated), randomly initialised; the caller loads weights.
std::shared_ptr<BackboneImpl> make_backbone(const BackboneConfig& config);

/// timm's eval transform on images already scaled to [0, 1] (float [B, C, H, W], any H and W):
/// grey → RGB when the backbone takes three channels, shorter side resized with antialiasing
/// (config.preprocess.interpolation, clamped to [0, 1] as an 8-bit image would be), centre crop,
/// normalisation. Returns `images` unchanged when config.preprocess is not enabled.
torch::Tensor preprocess_images(const torch::Tensor& images, const BackboneConfig& config);

}  // namespace mumoe::nn
