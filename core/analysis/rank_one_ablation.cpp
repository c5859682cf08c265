#include "analysis/rank_one_ablation.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

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

// Two float64 lanes (one SSE2 register; GCC and Clang vector extensions, so no intrinsics).
typedef double Lanes2 __attribute__((vector_size(16)));

// Classes per block of the CP pair kernel: four two-lane accumulators (spelled out in the
// kernel); the classes left over go two at a time, so U_Oᵀ is padded to an even count only.
constexpr int64_t kClassBlock = 8;

// The CP factors the pair kernel reads, row-major float64: contexts v [B, R], U_m [N, R], and
// U_Oᵀ [R, padded], its columns zero-padded to an even count.
struct CpPairFactors {
  const double* v;
  const double* mode_factor;
  const double* out_by_rank;
  int64_t rank, classes, padded;
};

// out[p, c] = scale[p] Σ_r v[row[p], r] U_m[expert[p], r] U_O[c, r] for pairs [begin, end).
// Each class has its own accumulator lane (no sum is reassociated); written with explicit
// two-lane vectors because GCC's -O2 leaves the plain loop scalar (19 ms → 8 ms for 46,200
// pairs, R = 64, O = 10, one core of this machine, 2026-11-24). Accumulators are named
// variables, not an array: GCC keeps an array of vectors on the stack and the loop then waits on
// its own stores (3.5× slower, measured).
void cp_pair_kernel(const CpPairFactors& f, int64_t begin, int64_t end, const int64_t* row, const int64_t* expert,
                    const double* scale, double* out) {
  auto load = [](const double* from) {
    Lanes2 w;
    std::memcpy(&w, from, sizeof w);  // unaligned load
    return w;
  };
  for (int64_t p = begin; p < end; ++p) {
    const double* vp = f.v + row[p] * f.rank;
    const double* up = f.mode_factor + expert[p] * f.rank;
    double* op = out + p * f.classes;
    auto store = [&](int64_t c, const Lanes2& sum) {
      for (int64_t j = 0; j < 2 && c + j < f.classes; ++j) op[c + j] = sum[j] * scale[p];
    };
    int64_t c = 0;
    for (; c + kClassBlock <= f.padded; c += kClassBlock) {
      Lanes2 s0 = {}, s1 = {}, s2 = {}, s3 = {};
      for (int64_t r = 0; r < f.rank; ++r) {
        const double x = vp[r] * up[r];
        const Lanes2 xx = {x, x};
        const double* wr = f.out_by_rank + r * f.padded + c;
        s0 += xx * load(wr);
        s1 += xx * load(wr + 2);
        s2 += xx * load(wr + 4);
        s3 += xx * load(wr + 6);
      }
      store(c, s0);
      store(c + 2, s1);
      store(c + 4, s2);
      store(c + 6, s3);
    }
    for (; c < f.padded; c += 2) {
      Lanes2 s0 = {};
      for (int64_t r = 0; r < f.rank; ++r) {
        const double x = vp[r] * up[r];
        s0 += Lanes2{x, x} * load(f.out_by_rank + r * f.padded + c);
      }
      store(c, s0);
    }
  }
}

// ‖v‖₂ and ‖v‖∞ of each row of v [B, R] (float64, contiguous) as [B, 2] on the CPU; a row
// holding NaN gives NaN for both, as torch's norm and max do. A plain pass on the CPU: torch's
// norm, abs and max over 1,024 × 64 contexts took 0.33 ms a block — a seventh of a softmax
// N = 128 sweep (2 cores, 2026-11-25).
torch::Tensor row_norms(const torch::Tensor& v) {
  if (!v.is_cpu()) return torch::stack({v.norm(2, 1), std::get<0>(v.abs().max(1))}, 1).cpu().contiguous();
  const int64_t rows = v.size(0), rank = v.size(1);
  auto out = torch::empty({rows, 2}, torch::kFloat64);
  const double* x = v.data_ptr<double>();
  double* norm = out.data_ptr<double>();
  for (int64_t b = 0; b < rows; ++b, x += rank) {
    double squares = 0, largest = 0;
    bool nan = false;
    for (int64_t r = 0; r < rank; ++r) {
      const double a = std::fabs(x[r]);
      squares += a * a;
      nan = nan || std::isnan(a);
      largest = std::max(largest, a);
    }
    norm[2 * b] = std::sqrt(squares);  // NaN already when any term is
    norm[2 * b + 1] = nan ? std::numeric_limits<double>::quiet_NaN() : largest;
  }
  return out;
}

}  // namespace

bool RankOneAblation::supports(const nn::MuMoEBlock& layer) { return !layer->config().is_block(); }

RankOneAblation::RankOneAblation(const nn::MuMoEBlock& layer, int64_t mode)
    : cp_(layer->config().factorization == nn::Factorization::CP), mode_(mode), layer_(layer) {
  if (!supports(layer)) throw UsageError("the rank-one correction needs a single μMoE layer, not a two-layer block");
  torch::NoGradGuard no_grad;
  const auto modes = static_cast<int64_t>(layer_->config().expert_dims.size());
  if (mode < 0 || mode >= modes) throw UsageError("expert mode " + std::to_string(mode) + " does not exist");
  // Widening float32 (or float64) to float64 is exact: the same numbers as a float64 copy of the
  // layer, so the corrections are those of the arithmetic the oracle runs.
  const auto source = layer_->first_layer()->factors();
  for (size_t e = 0; e < source.size(); ++e) {
    // CP's mode factor [N, R] is widened row by row when used (mode_rows, widen_mode_factor).
    const bool later = cp_ && static_cast<int64_t>(e) == mode;
    factors_.push_back(later ? torch::Tensor() : source[e].to(torch::kFloat64));
  }
  if (cp_) mode_source_ = source[static_cast<size_t>(mode)];
  const auto children = layer_->named_children();
  if (const auto* norm = children.find("input_ln")) {
    const auto ln = std::dynamic_pointer_cast<torch::nn::LayerNormImpl>(*norm);
    input_ln_ = true;
    if (ln->weight.defined()) input_ln_weight_ = ln->weight.to(torch::kFloat64);
    if (ln->bias.defined()) input_ln_bias_ = ln->bias.to(torch::kFloat64);
    input_ln_eps_ = ln->options.eps();
  }
  const auto& out = factors_[modes + 1];
  if (cp_) {
    out_flat_ = out;  // [O, R]
    const int64_t padded = (out.size(0) + 1) / 2 * 2;
    out_by_rank_ = torch::zeros({out.size(1), padded}, torch::kFloat64);  // [R, O padded to even]
    out_by_rank_.narrow(1, 0, out.size(0)).copy_(out.t());
    class_spread_ = class_spread(out);
  } else {
    const auto r_last = out.size(0), o = out.size(1), r1 = out.size(2);  // Out [R_last, O, R1]
    out_flat_ = out.permute({2, 0, 1}).reshape({r1 * r_last, o});
    class_spread_ = class_spread(out_flat_.t());
    slice_norm_ = factors_[mode].permute({1, 0, 2}).flatten(1).norm(2, 1).cpu().contiguous();  // [N]
  }
}

void RankOneAblation::set_contexts(const torch::Tensor& inputs, const std::vector<torch::Tensor>& coefficients,
                                   bool bounds) {
  torch::NoGradGuard no_grad;
  const auto modes = static_cast<int64_t>(coefficients.size());
  // The layer's own input path: LayerNorm (when the block has one; LayerNormImpl::forward's
  // call, with the widened parameters), then the bias column.
  auto z = inputs;
  if (input_ln_) z = torch::layer_norm(z, {z.size(-1)}, input_ln_weight_, input_ln_bias_, input_ln_eps_);
  if (layer_->first_layer()->use_bias()) z = nn::with_bias_column(z);
  count_ = inputs.size(0);
  if (cp_) {
    auto v = z.matmul(factors_[modes]);  // [B, R]
    for (int64_t e = 0; e < modes; ++e)
      if (e != mode_) v = v * coefficients[e].matmul(factors_[e]);
    v_ = v.contiguous();
    context_norm_ = bounds ? row_norms(v_) : torch::Tensor();
    return;
  }
  const auto r1 = factors_[0].size(0);
  auto left = torch::eye(r1, inputs.options()).expand({count_, r1, r1});
  for (int64_t e = 0; e < mode_; ++e) left = left.bmm(mode2(factors_[e], coefficients[e]));
  auto right = mode2(factors_[modes], z);  // F_z(z̃) [B, R_m, R_last]
  for (int64_t e = modes - 1; e > mode_; --e) right = mode2(factors_[e], coefficients[e]).bmm(right);
  left_ = left.contiguous();
  right_ = right.contiguous();
  context_norm_ = bounds ? (left_.flatten(1).norm(2, 1) * right_.flatten(1).norm(2, 1)).cpu().contiguous()
                         : torch::Tensor();
}

torch::Tensor RankOneAblation::pair_deltas(const torch::Tensor& rows, const torch::Tensor& experts,
                                           const torch::Tensor& a) const {
  torch::NoGradGuard no_grad;
  // a scales the [P, O] result, not the [P, R] operands: broadcasting a column over a wide
  // operand is LibTorch's slow elementwise path (6× a plain product, measured).
  if (cp_ && v_.is_cpu()) return cp_pair_deltas_cpu(rows, experts, a);
  if (cp_) {
    const auto product = v_.index_select(0, rows) * mode_rows(experts);
    return product.matmul(out_flat_.t()) * a.unsqueeze(1);
  }
  const auto slices = factors_[mode_].permute({1, 0, 2}).index_select(0, experts);
  const auto m = left_.index_select(0, rows).bmm(slices).bmm(right_.index_select(0, rows));
  return m.flatten(1).matmul(out_flat_) * a.unsqueeze(1);
}

torch::Tensor RankOneAblation::cp_pair_deltas_cpu(const torch::Tensor& rows, const torch::Tensor& experts,
                                                  const torch::Tensor& a) const {
  // Δ[p, c] = a_p Σ_r v[row_p, r] U_m[n_p, r] U_O[c, r], as plain loops over the cached factors:
  // 640 multiply-adds per pair are too few for tensor operations, whose gathers, allocations and
  // hand-overs between ATen's and OpenBLAS's thread pools cost more than the arithmetic (a
  // softmax N = 128 sweep spent 2–3× its arithmetic there, 2 cores, 2026-11-24).
  widen_mode_factor();
  const auto row_of = rows.contiguous(), expert_of = experts.contiguous(), weight = a.contiguous();
  const int64_t pairs = row_of.size(0), rank = v_.size(1), classes = out_flat_.size(0);
  auto deltas = torch::empty({pairs, classes}, torch::kFloat64);
  const CpPairFactors f{v_.data_ptr<double>(), mode_factor_.data_ptr<double>(), out_by_rank_.data_ptr<double>(),
                        rank, classes, out_by_rank_.size(1)};
  const auto* row = row_of.data_ptr<int64_t>();
  const auto* expert = expert_of.data_ptr<int64_t>();
  const auto* scale = weight.data_ptr<double>();
  auto* out = deltas.data_ptr<double>();
  at::parallel_for(0, pairs, 512, [&](int64_t begin, int64_t end) {
    cp_pair_kernel(f, begin, end, row, expert, scale, out);
  });
  return deltas;
}

torch::Tensor RankOneAblation::set_deltas(const torch::Tensor& experts, const torch::Tensor& weights) const {
  torch::NoGradGuard no_grad;
  if (cp_) return (weights.matmul(mode_rows(experts)) * v_).matmul(out_flat_.t());
  const auto slices = factors_[mode_].index_select(1, experts);  // [Ra, K, Rb]
  return left_.bmm(mode2(slices, weights)).bmm(right_).flatten(1).matmul(out_flat_);
}

RankOneAblation::Pairs RankOneAblation::pairs_that_may_change(const cache::SparseRows& coefficients, int64_t first,
                                                              const double* limits) const {
  // |Δ_c − Δ_p| = a·|⟨x, Out_c − Out_p⟩| ≤ a·‖x‖₂·spread, where x is the pair's rank-one term:
  // CP x = v ⊙ U_m[n] with ‖x‖₂ ≤ min(‖v‖₂‖U_m[n]‖∞, ‖v‖∞‖U_m[n]‖₂); TR x = vec(L F_n R) with
  // ‖x‖₂ ≤ ‖L‖_F ‖F_n‖_F ‖R‖_F. A pair whose bound stays below the limit cannot change the
  // prediction.
  if (!context_norm_.defined()) throw std::logic_error("pairs_that_may_change needs contexts set with bounds");
  if (cp_) widen_mode_factor();
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

torch::Tensor RankOneAblation::mode_rows(const torch::Tensor& experts) const {
  return mode_source_.index_select(0, experts.to(mode_source_.device())).to(torch::kFloat64);
}

void RankOneAblation::widen_mode_factor() const {
  if (mode_factor_.defined()) return;
  torch::NoGradGuard no_grad;
  const auto u = mode_source_.to(torch::kCPU, torch::kFloat64).contiguous();  // [N, R]
  slice_norm_ = torch::stack({std::get<0>(u.abs().max(1)), u.norm(2, 1)}, 1).contiguous();  // [N, 2]
  mode_factor_ = u;
}

}  // namespace mumoe::analysis
