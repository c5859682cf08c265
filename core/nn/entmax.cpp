#include "nn/entmax.h"

#include <torch/autograd.h>
#include <torch/torch.h>

namespace mumoe::nn {
namespace {

// Forward of entmax15 over the last dim (spec §1). Everything is done in the input's dtype.
torch::Tensor entmax15_forward(const torch::Tensor& x_in) {
  const int64_t d = x_in.size(-1);
  // Scale and shift: p = max(x − τ, 0)² with x := (x − max x) / 2.
  auto x = (x_in - std::get<0>(x_in.max(-1, /*keepdim=*/true))) / 2;
  auto sorted = std::get<0>(x.sort(-1, /*descending=*/true));
  auto k = torch::arange(1, d + 1, x.options()).expand_as(sorted);
  auto mean = sorted.cumsum(-1) / k;
  auto mean_sq = sorted.pow(2).cumsum(-1) / k;
  auto delta = (1 - k * (mean_sq - mean.pow(2))) / k;
  auto tau_candidates = mean - delta.clamp_min(0).sqrt();
  // The support size k* is the number of k with τ_k ≤ s_k; it is ≥ 1 because τ_1 = s_1 − 1.
  auto support = (tau_candidates <= sorted).sum(-1, /*keepdim=*/true);
  auto tau = tau_candidates.gather(-1, support - 1);
  return (x - tau).clamp_min(0).pow(2);
}

class Entmax15Function : public torch::autograd::Function<Entmax15Function> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x) {
    auto p = entmax15_forward(x);
    ctx->save_for_backward({p});
    return p;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    auto p = ctx->get_saved_variables()[0];
    auto g = p.sqrt();
    auto dx = grad_outputs[0] * g;
    auto q = dx.sum(-1, /*keepdim=*/true) / g.sum(-1, /*keepdim=*/true);
    return {dx - q * g};
  }
};

}  // namespace

torch::Tensor entmax15(const torch::Tensor& scores) {
  TORCH_CHECK(scores.dim() >= 1, "entmax15: input must have at least one dimension");
  TORCH_CHECK(scores.is_floating_point(), "entmax15: input must be floating point");
  if (scores.size(-1) == 0) return scores.clone();
  return Entmax15Function::apply(scores);
}

torch::Tensor apply_gate_activation(GateActivationKind activation, const torch::Tensor& scores) {
  switch (activation) {
    case GateActivationKind::Entmax15: return entmax15(scores);
    case GateActivationKind::Softmax: return torch::softmax(scores, -1);
  }
  TORCH_CHECK(false, "unknown gate activation");
}

}  // namespace mumoe::nn
