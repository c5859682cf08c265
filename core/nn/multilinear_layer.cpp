#include "nn/multilinear_layer.h"

#include <torch/torch.h>

#include <cmath>

#include "nn/factorized_forward.h"
#include "nn/module_state.h"

namespace mumoe::nn {

MultilinearLayerImpl::MultilinearLayerImpl(const LayerConfig& config, int layer)
    : factorization_(config.factorization),
      use_bias_(config.use_bias),
      input_dim_(layer == 0 ? config.input_dim : config.output_dim),
      hierarchy_(config.hierarchy()) {
  config.validate();
  for (const auto& shape : config.factor_shapes(layer))
    factors_->append(torch::empty(shape).requires_grad_());  // append() keeps the flag
  register_module("factors", factors_);
  if (!SkipRandomInitialisation::active()) reset_parameters();
}

std::vector<torch::Tensor> MultilinearLayerImpl::factors() const {
  std::vector<torch::Tensor> out;
  for (const auto& p : factors_->named_parameters(/*recurse=*/false)) out.push_back(p.value());
  return out;
}

void MultilinearLayerImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  auto fs = factors();
  const int64_t modes = hierarchy_;
  auto uniform = [](torch::Tensor& t, double fan_in) {
    const double bound = std::sqrt(1.0 / fan_in);
    t.uniform_(-bound, bound);
  };
  if (factorization_ == Factorization::CP) {
    const double rank = static_cast<double>(fs[0].size(1));
    // Expert factors replicate one linear map across experts: N(1, σ) with σ = 1 for the
    // first mode and σ = 0 (all ones) for later modes.
    fs[0].normal_(1.0, 1.0);
    for (int64_t e = 1; e < modes; ++e) fs[e].fill_(1.0);
    uniform(fs[modes], static_cast<double>(input_dim_));
    uniform(fs[modes + 1], rank);
  } else {
    for (int64_t e = 0; e < modes; ++e) {
      auto& core = fs[e];  // [Ra, N, Rb]: every expert slice diag(N(1, σ))
      const double sigma = e == 0 ? 1.0 : 0.0;
      const auto ra = core.size(0), rb = core.size(2);
      auto eye = torch::eye(ra, rb, core.options()).unsqueeze(1);
      auto noise = torch::randn({ra, core.size(1), rb}, core.options()) * sigma + 1.0;
      core.copy_(eye * noise);
    }
    uniform(fs[modes], static_cast<double>(input_dim_));
    const auto& out = fs[modes + 1];  // [R_last, O, R1]
    uniform(fs[modes + 1], static_cast<double>(out.size(0) * out.size(2)));
  }
}

torch::Tensor MultilinearLayerImpl::input_with_bias(const torch::Tensor& z) const {
  return use_bias_ ? with_bias_column(z) : z;
}

torch::Tensor MultilinearLayerImpl::cp_input_side(const torch::Tensor& z) const {
  TORCH_CHECK(factorization_ == Factorization::CP, "cp_input_side: the layer is not a CP layer");
  const auto fs = factors();
  return cp_input_side_of(fs[fs.size() - 2], z, use_bias_);
}

torch::Tensor MultilinearLayerImpl::forward(const torch::Tensor& z,
                                            const std::vector<torch::Tensor>& coefficients) {
  const auto fs = factors();  // once per forward pass
  return factorization_ == Factorization::CP
             ? cp_forward_from_input_side(fs, coefficients, cp_input_side_of(fs[fs.size() - 2], z, use_bias_))
             : tr_forward(fs, coefficients, input_with_bias(z));
}

}  // namespace mumoe::nn
