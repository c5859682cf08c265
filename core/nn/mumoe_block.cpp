#include "nn/mumoe_block.h"

#include <torch/torch.h>

#include "io/errors.h"
#include "nn/entmax.h"
#include "nn/module_state.h"

namespace mumoe::nn {

MuMoEBlockImpl::MuMoEBlockImpl(LayerConfig config) : config_(std::move(config)) {
  config_.validate();
  for (auto n : config_.expert_dims) projs_->append(torch::zeros({config_.input_dim, n}).requires_grad_());
  register_module("projs", projs_);
  if (config_.gate_norm == GateNorm::BatchNorm) {
    for (auto n : config_.expert_dims)
      batch_norms_->push_back(torch::nn::BatchNorm1d(
          torch::nn::BatchNorm1dOptions(n).affine(false).eps(config_.norm_eps)));
    register_module("bn", batch_norms_);
  }
  if (config_.input_layer_norm) {
    input_norm_ = register_module(
        "input_ln", torch::nn::LayerNorm(torch::nn::LayerNormOptions({config_.input_dim})
                                             .eps(config_.norm_eps)));
  }
  layer1_ = register_module("MuMoE", MultilinearLayer(config_, 0));
  if (config_.is_block()) layer2_ = register_module("MuMoE2", MultilinearLayer(config_, 1));
}

void MuMoEBlockImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  for (auto& p : projs_->parameters()) p.zero_();
  if (input_norm_) input_norm_->reset_parameters();
  layer1_->reset_parameters();
  if (layer2_) layer2_->reset_parameters();
}

torch::Tensor MuMoEBlockImpl::flatten_rows(const torch::Tensor& x) const {
  if ((x.dim() != 2 && x.dim() != 3) || x.size(-1) != config_.input_dim) {
    throw UsageError("μMoE layer expects input of shape [B, " + std::to_string(config_.input_dim) +
                     "] or [B, T, " + std::to_string(config_.input_dim) + "], got " +
                     c10::str(x.sizes()));
  }
  return x.reshape({-1, config_.input_dim});
}

std::vector<torch::Tensor> MuMoEBlockImpl::gate(const torch::Tensor& rows,
                                                const ExpertAblation& ablation) {
  if (ablation.experts_per_mode.size() > config_.expert_dims.size())
    throw UsageError("ablation names expert mode " +
                     std::to_string(ablation.experts_per_mode.size() - 1) + " but the layer has " +
                     std::to_string(config_.expert_dims.size()) + " expert mode(s)");
  std::vector<torch::Tensor> coefficients;
  const auto projs = projs_->parameters(false);
  for (size_t e = 0; e < config_.expert_dims.size(); ++e) {
    auto scores = rows.matmul(projs[e]);  // [M, N_e]
    switch (config_.gate_norm) {
      case GateNorm::BatchNorm:
        // BatchNorm1d over [M, N_e] == the reference's BatchNorm1d over [B, N_e, T]: both
        // normalise each expert's score over all batch × token positions.
        scores = batch_norms_[e]->as<torch::nn::BatchNorm1d>()->forward(scores);
        break;
      case GateNorm::LayerNorm:
        scores = torch::layer_norm(scores, {scores.size(-1)}, {}, {}, config_.norm_eps);
        break;
      case GateNorm::None: break;
    }
    auto a = apply_gate_activation(config_.gate_activation, scores);
    if (e < ablation.experts_per_mode.size() && !ablation.experts_per_mode[e].empty()) {
      for (auto n : ablation.experts_per_mode[e])
        if (n < 0 || n >= config_.expert_dims[e])
          throw UsageError("cannot ablate expert " + std::to_string(n) + " of mode " +
                           std::to_string(e) + ": the mode has experts 0–" +
                           std::to_string(config_.expert_dims[e] - 1));
      auto index = torch::tensor(ablation.experts_per_mode[e], torch::dtype(torch::kLong))
                       .to(a.device());
      a = a.index_fill(1, index, 0);  // no renormalisation: exactly W_n := 0
    }
    coefficients.push_back(a);
  }
  return coefficients;
}

std::vector<torch::Tensor> MuMoEBlockImpl::coefficients(const torch::Tensor& x,
                                                        const ExpertAblation& ablation) {
  auto coeffs = gate(flatten_rows(x), ablation);
  for (size_t e = 0; e < coeffs.size(); ++e) {
    auto shape = x.sizes().vec();
    shape.back() = config_.expert_dims[e];
    coeffs[e] = coeffs[e].view(shape);
  }
  return coeffs;
}

torch::Tensor MuMoEBlockImpl::output_from_coefficients(const torch::Tensor& rows,
                                                       const std::vector<torch::Tensor>& coefficients) {
  // The reference applies the input LayerNorm after the gates have seen the raw input.
  auto z = input_norm_ ? input_norm_->forward(rows) : rows;
  auto y = layer1_->forward(z, coefficients);
  if (layer2_) y = layer2_->forward(torch::gelu(y), coefficients);
  return y;
}

BlockOutput MuMoEBlockImpl::forward(const torch::Tensor& x, const ExpertAblation& ablation) {
  auto rows = flatten_rows(x);
  auto coeffs = gate(rows, ablation);
  auto y = output_from_coefficients(rows, coeffs);

  BlockOutput out;
  auto shape = x.sizes().vec();
  shape.back() = config_.final_output_dim();
  out.output = y.view(shape);
  for (size_t e = 0; e < coeffs.size(); ++e) {
    shape.back() = config_.expert_dims[e];
    out.coefficients.push_back(coeffs[e].view(shape));
  }
  return out;
}

MuMoEBlock copy_block(const MuMoEBlock& block, torch::Dtype dtype, const torch::Device& device) {
  return copy_for_eval(block, dtype, device);
}

}  // namespace mumoe::nn
