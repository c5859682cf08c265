// The μMoE wrapper: gating, optional input LayerNorm, one factorised layer or the two-layer
// block (spec §1). Parameter and buffer names equal the reference implementation's state-dict
// keys (spec §2): projs.{e}, bn.{e}.running_mean/var/num_batches_tracked, input_ln.weight/bias,
// MuMoE.factors.{k}, MuMoE2.factors.{k}.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/parameterlist.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include <vector>

#include "nn/expert_ablation.h"
#include "nn/layer_config.h"
#include "nn/multilinear_layer.h"

namespace mumoe::nn {

/// What a forward pass returns: the outputs AND the coefficients of every expert mode.
struct BlockOutput {
  torch::Tensor output;                     ///< [B, O'] or [B, T, O']
  std::vector<torch::Tensor> coefficients;  ///< per mode: [B, N_e] or [B, T, N_e], as used
                                            ///< (ablated experts are 0)
  /// Router layers (ClassifierModel::is_router) only: the load-balancing loss their training adds
  /// (undefined for μMoE layers, which need none) and the tokens no expert received.
  torch::Tensor aux_loss;
  int64_t dropped_tokens = 0;
};

class MuMoEBlockImpl : public torch::nn::Module {
 public:
  explicit MuMoEBlockImpl(LayerConfig config);

  /// x: [B, I] or [B, T, I] on any device/dtype the module has been moved to. BatchNorm gating
  /// uses running statistics in eval() mode and batch statistics over batch × tokens in train().
  BlockOutput forward(const torch::Tensor& x, const ExpertAblation& ablation = {});

  /// The block's output for rows z [M, I] with the given coefficients (per mode [M, N_e]),
  /// skipping the gates: what counterfactual ablation needs to re-evaluate only the affected
  /// rows with a few coefficients set to zero. forward(x) == output_from_coefficients(x, coeffs).
  torch::Tensor output_from_coefficients(const torch::Tensor& rows,
                                         const std::vector<torch::Tensor>& coefficients);

  /// Only the expert coefficients (what the galleries and statistics need), same shapes.
  std::vector<torch::Tensor> coefficients(const torch::Tensor& x,
                                          const ExpertAblation& ablation = {});

  const LayerConfig& config() const { return config_; }
  MultilinearLayer first_layer() const { return layer1_; }
  /// Empty holder unless config().is_block().
  MultilinearLayer second_layer() const { return layer2_; }

  /// Re-initialises every parameter as in spec §1 (gating to zero).
  void reset_parameters();

 private:
  torch::Tensor flatten_rows(const torch::Tensor& x) const;
  std::vector<torch::Tensor> gate(const torch::Tensor& rows, const ExpertAblation& ablation);

  LayerConfig config_;
  torch::nn::ParameterList projs_;
  torch::nn::ModuleList batch_norms_;
  torch::nn::LayerNorm input_norm_{nullptr};
  MultilinearLayer layer1_{nullptr};
  MultilinearLayer layer2_{nullptr};
};
TORCH_MODULE(MuMoEBlock);

/// An independent copy of `block` (parameters and buffers) as `dtype` on `device`, in eval mode.
/// Analysis evaluates layers in float64 on such copies, leaving the model untouched.
MuMoEBlock copy_block(const MuMoEBlock& block, torch::Dtype dtype, const torch::Device& device);

}  // namespace mumoe::nn
