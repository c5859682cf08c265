#include "analysis/rank_one_ablation.h"

#include <torch/torch.h>

#include <algorithm>

#include "io/errors.h"
#include "nn/factorized_forward.h"

namespace mumoe::analysis {
namespace {

// Batched mode-2 product of a TR core F [Ra, N, Rb] with rows w [B, N]: Σ_n w_n F[:, n, :] → [B, Ra, Rb].
torch::Tensor mode2(const torch::Tensor& core, const torch::Tensor& rows) {
  const auto ra = core.size(0), n = core.size(1), rb = core.size(2);
  return rows.matmul(core.permute({1, 0, 2}).reshape({n, ra * rb})).view({rows.size(0), ra, rb});
}

// The largest distance between two classes' rows of `by_class` [O, K] (0 for one class).
double class_spread(const torch::Tensor& by_class) {
  if (by_class.size(0) < 2) return 0;
  return torch::cdist(by_class.unsqueeze(0), by_class.unsqueeze(0)).max().item<double>();
}

}  // namespace

bool RankOneAblation::supports(const nn::MuMoEBlock& layer) { return !layer->config().is_block(); }

RankOneAblation::RankOneAblation(const nn::MuMoEBlock& layer, int64_t mode)
    : cp_(layer->config().factorization == nn::Factorization::CP), mode_(mode), layer_(layer) {
  if (!supports(layer)) throw UsageError("the rank-one correction needs a single μMoE layer, not a two-layer block");
  torch::NoGradGuard no_grad;
  factors_ = layer_->first_layer()->factors();
  const auto modes = static_cast<int64_t>(layer_->config().expert_dims.size());
  if (mode < 0 || mode >= modes) throw UsageError("expert mode " + std::to_string(mode) + " does not exist");
  const auto& out = factors_[modes + 1];
  if (cp_) {
    out_flat_ = out;  // [O, R]
    class_spread_ = class_spread(out);
    const auto& u = factors_[mode];  // [N, R]
    slice_norm_ = torch::stack({std::get<0>(u.abs().max(1)), u.norm(2, 1)}, 1).cpu().contiguous();  // [N, 2]
  } else {
    const auto r_last = out.size(0), o = out.size(1), r1 = out.size(2);  // Out [R_last, O, R1]
    out_flat_ = out.permute({2, 0, 1}).reshape({r1 * r_last, o});
    class_spread_ = class_spread(out_flat_.t());
    slice_norm_ = factors_[mode].permute({1, 0, 2}).flatten(1).norm(2, 1).cpu().contiguous();  // [N]
  }
}

void RankOneAblation::set_contexts(const torch::Tensor& inputs, const std::vector<torch::Tensor>& coefficients) {
  torch::NoGradGuard no_grad;
  const auto modes = static_cast<int64_t>(coefficients.size());
  // The layer's own input path: LayerNorm (when the block has one), then the bias column.
  auto z = inputs;
  const auto children = layer_->named_children();
  if (const auto* norm = children.find("input_ln"))
    z = std::dynamic_pointer_cast<torch::nn::LayerNormImpl>(*norm)->forward(z);
  if (layer_->first_layer()->use_bias()) z = nn::with_bias_column(z);
  count_ = inputs.size(0);
  if (cp_) {
    auto v = z.matmul(factors_[modes]);  // [B, R]
    for (int64_t e = 0; e < modes; ++e)
      if (e != mode_) v = v * coefficients[e].matmul(factors_[e]);
    v_ = v;
    context_norm_ = torch::stack({v.norm(2, 1), std::get<0>(v.abs().max(1))}, 1).cpu().contiguous();
    return;
  }
  const auto r1 = factors_[0].size(0);
  auto left = torch::eye(r1, inputs.options()).expand({count_, r1, r1});
  for (int64_t e = 0; e < mode_; ++e) left = left.bmm(mode2(factors_[e], coefficients[e]));
  auto right = mode2(factors_[modes], z);  // F_z(z̃) [B, R_m, R_last]
  for (int64_t e = modes - 1; e > mode_; --e) right = mode2(factors_[e], coefficients[e]).bmm(right);
  left_ = left.contiguous();
  right_ = right.contiguous();
  context_norm_ = (left_.flatten(1).norm(2, 1) * right_.flatten(1).norm(2, 1)).cpu().contiguous();
}

torch::Tensor RankOneAblation::pair_deltas(const torch::Tensor& rows, const torch::Tensor& experts,
                                           const torch::Tensor& a) const {
  torch::NoGradGuard no_grad;
  // a scales the [P, O] result, not the [P, R] operands: broadcasting a column over a wide
  // operand is LibTorch's slow elementwise path (6× a plain product, measured).
  if (cp_) {
    const auto product = v_.index_select(0, rows) * factors_[mode_].index_select(0, experts);
    return product.matmul(out_flat_.t()) * a.unsqueeze(1);
  }
  const auto slices = factors_[mode_].permute({1, 0, 2}).index_select(0, experts);
  const auto m = left_.index_select(0, rows).bmm(slices).bmm(right_.index_select(0, rows));
  return m.flatten(1).matmul(out_flat_) * a.unsqueeze(1);
}

torch::Tensor RankOneAblation::set_deltas(const torch::Tensor& weights) const {
  torch::NoGradGuard no_grad;
  if (cp_) return (weights.matmul(factors_[mode_]) * v_).matmul(out_flat_.t());
  return left_.bmm(mode2(factors_[mode_], weights)).bmm(right_).flatten(1).matmul(out_flat_);
}

RankOneAblation::Pairs RankOneAblation::pairs_that_may_change(const cache::SparseRows& coefficients, int64_t first,
                                                              const double* limits) const {
  // |Δ_c − Δ_p| = a·|⟨x, Out_c − Out_p⟩| ≤ a·‖x‖₂·spread, where x is the pair's rank-one term:
  // CP x = v ⊙ U_m[n] with ‖x‖₂ ≤ min(‖v‖₂‖U_m[n]‖∞, ‖v‖∞‖U_m[n]‖₂); TR x = vec(L F_n R) with
  // ‖x‖₂ ≤ ‖L‖_F ‖F_n‖_F ‖R‖_F. A pair whose bound stays below the limit cannot change the
  // prediction.
  Pairs out;
  const auto* context = context_norm_.data_ptr<double>();
  const auto* slice = slice_norm_.data_ptr<double>();
  for (int64_t b = 0; b < count_; ++b) {
    const int64_t s = first + b;
    const double limit = limits[b];
    for (int64_t k = coefficients.offsets[s]; k < coefficients.offsets[s + 1]; ++k) {
      const int64_t n = coefficients.indices[k];
      const double a = coefficients.values[k];
      const double norm = cp_ ? std::min(context[2 * b] * slice[2 * n], context[2 * b + 1] * slice[2 * n + 1])
                              : context[b] * slice[n];
      if (a * norm * class_spread_ >= limit) {
        out.rows.push_back(b);
        out.experts.push_back(n);
        out.a.push_back(a);
      }
    }
  }
  return out;
}

}  // namespace mumoe::analysis
