// One factorised μMoE layer (the "MuMoE"/"MuMoE2" sub-module of the reference wrapper).
//
// Holds the factors in a ParameterList named "factors", so its state-dict keys are
// "factors.0", "factors.1", … exactly as in the reference implementation (spec §2).
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/parameterlist.h>
#include <torch/nn/pimpl.h>

#include <vector>

#include "nn/layer_config.h"

namespace mumoe::nn {

class MultilinearLayerImpl : public torch::nn::Module {
 public:
  /// `layer` selects the first (0: I → O) or second (1: O → second_dim) layer of `config`.
  MultilinearLayerImpl(const LayerConfig& config, int layer);

  /// z [M, I] (without the bias column), coefficients[e] [M, N_e] → [M, O].
  torch::Tensor forward(const torch::Tensor& z, const std::vector<torch::Tensor>& coefficients);

  /// Initialisation of spec §1 / paper App. F.2 (under NoGradGuard).
  void reset_parameters();

  std::vector<torch::Tensor> factors() const;
  Factorization factorization() const { return factorization_; }
  bool use_bias() const { return use_bias_; }
  /// z [M, I] with the bias column where the layer has one: what forward() multiplies by the
  /// input factor (the ablation engines and ExactLayer compute parts of forward() from it).
  torch::Tensor input_with_bias(const torch::Tensor& z) const;
  /// CP layers: U_inᵀ [z; 1] from z [M, I] (nn::cp_input_side_of), the first half of forward() with
  /// its bits — what the ablation engines compute parts of forward() from.
  torch::Tensor cp_input_side(const torch::Tensor& z) const;

 private:
  Factorization factorization_;
  bool use_bias_;
  int64_t input_dim_;
  int64_t hierarchy_;
  torch::nn::ParameterList factors_;
};
TORCH_MODULE(MultilinearLayer);

}  // namespace mumoe::nn
