#include "nn/entmax.h"

#include <ATen/Parallel.h>
#include <torch/autograd.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

namespace mumoe::nn {
namespace {

// The threshold τ from the k largest scores, sorted descending ([..., k]): the candidates
// τ_j = mean_j − sqrt(max(δ_j, 0)) for j = 1..k, and how many satisfy τ_j ≤ s_j (spec §1). The
// condition holds on a prefix of j, so a count below k is the support size over all scores.
std::pair<torch::Tensor, torch::Tensor> entmax15_threshold(const torch::Tensor& sorted) {
  const int64_t width = sorted.size(-1);
  auto k = torch::arange(1, width + 1, sorted.options()).expand_as(sorted);
  auto mean = sorted.cumsum(-1) / k;
  auto mean_sq = sorted.pow(2).cumsum(-1) / k;
  auto delta = (1 - k * (mean_sq - mean.pow(2))) / k;
  auto tau_candidates = mean - delta.clamp_min(0).sqrt();
  // The support size k* is ≥ 1 because τ_1 = s_1 − 1. A row with a NaN counts no candidate (every
  // comparison is false): clamping to 1 makes its output NaN instead of gathering index −1.
  auto support = (tau_candidates <= sorted).sum(-1, /*keepdim=*/true).clamp_min(1);
  return {tau_candidates, support};
}

// Forward of entmax15 over the last dim (spec §1) in ATen operations, for any device. Everything is
// done in the input's dtype.
// The support is usually a few dozen of the scores (35 of 1,024 gates in the entmax heads we
// train), so τ comes from the top K scores (topk, not a full sort: 5× faster at d = 1,024), K
// growing while some row's support fills all K. The prefix sums are the full sort's, summed in
// the same order, so the result is the same to the bit.
torch::Tensor entmax15_by_tensor_ops(const torch::Tensor& x_in) {
  const int64_t d = x_in.size(-1);
  // Scale and shift: p = max(x − τ, 0)² with x := (x − max x) / 2.
  auto x = (x_in - std::get<0>(x_in.max(-1, /*keepdim=*/true))) / 2;
  constexpr int64_t kFirstWidth = 64;
  for (int64_t width = std::min(d, kFirstWidth);; width = std::min(d, width * 4)) {
    auto sorted = width == d ? std::get<0>(x.sort(-1, /*descending=*/true))
                             : std::get<0>(x.topk(width, -1, /*largest=*/true, /*sorted=*/true));
    auto [tau_candidates, support] = entmax15_threshold(sorted);
    if (width == d || (support < width).all().item<bool>())
      return (x - tau_candidates.gather(-1, support - 1)).clamp_min(0).pow(2);
  }
}

// entmax15_by_tensor_ops on the CPU, row by row, with its bits: a row of a [M, d] float or double
// tensor is shifted and halved, its largest K values sorted (std::partial_sort, K growing as
// above), and the same recurrences evaluated in the same order and precision — the prefix sums
// accumulated in double and rounded to the row's type after each term, as ATen's CPU cumsum does
// (acc_type), every other step in the row's type. One pass per row instead of ~15 tensor
// operations over the whole batch: the sort alone was 15 % of a μMoE Mixer's forward pass
// (docs/BENCHMARKS.md). Tested to give entmax15_by_tensor_ops's bits (EntmaxKernel.*).
template <typename T>
void entmax15_rows(const T* in, T* out, int64_t rows, int64_t d) {
  at::parallel_for(0, rows, std::max<int64_t>(1, 4096 / d), [&](int64_t begin, int64_t end) {
    std::vector<T> x(static_cast<size_t>(d)), sorted(static_cast<size_t>(d)), tau(static_cast<size_t>(d));
    for (int64_t r = begin; r < end; ++r) {
      const T* row = in + r * d;
      T* p = out + r * d;
      T max = row[0];
      bool nan = false;
      for (int64_t j = 0; j < d; ++j) {
        nan |= std::isnan(row[j]);
        if (row[j] > max) max = row[j];
      }
      for (int64_t j = 0; j < d; ++j) {
        x[j] = (row[j] - max) / T(2);
        nan |= std::isnan(x[j]);  // +inf − +inf
      }
      if (nan) {  // as the tensor path: a NaN anywhere makes the whole row NaN
        std::fill(p, p + d, std::numeric_limits<T>::quiet_NaN());
        continue;
      }
      int64_t support = 0;
      for (int64_t width = std::min<int64_t>(d, 64);; width = std::min(d, width * 4)) {
        std::copy(x.begin(), x.end(), sorted.begin());
        std::partial_sort(sorted.begin(), sorted.begin() + width, sorted.end(), std::greater<T>());
        double sum = 0, sum_sq = 0;
        support = 0;
        for (int64_t j = 0; j < width; ++j) {
          const T k = static_cast<T>(j + 1);
          const T s = sorted[j];
          sum += s;
          sum_sq += static_cast<double>(s * s);
          const T mean = static_cast<T>(sum) / k;
          const T mean_sq = static_cast<T>(sum_sq) / k;
          const T delta = (T(1) - k * (mean_sq - mean * mean)) / k;
          tau[j] = mean - std::sqrt(delta < T(0) ? T(0) : delta);  // NaN stays NaN, as clamp_min
          support += tau[j] <= s;
        }
        if (width == d || support < width) break;
      }
      const T threshold = tau[std::max<int64_t>(support, 1) - 1];
      for (int64_t j = 0; j < d; ++j) {
        const T v = x[j] - threshold;
        const T clamped = v < T(0) ? T(0) : v;
        p[j] = clamped * clamped;
      }
    }
  });
}

torch::Tensor entmax15_forward(const torch::Tensor& x_in) {
  if (!x_in.device().is_cpu() || (x_in.scalar_type() != torch::kFloat && x_in.scalar_type() != torch::kDouble) ||
      x_in.numel() == 0)
    return entmax15_by_tensor_ops(x_in);
  const auto x = x_in.contiguous();
  auto out = torch::empty_like(x);
  const int64_t d = x.size(-1), rows = x.numel() / d;
  if (x.scalar_type() == torch::kFloat)
    entmax15_rows(x.data_ptr<float>(), out.data_ptr<float>(), rows, d);
  else
    entmax15_rows(x.data_ptr<double>(), out.data_ptr<double>(), rows, d);
  return out;
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

torch::Tensor entmax15_reference_forward(const torch::Tensor& scores) { return entmax15_by_tensor_ops(scores); }

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
