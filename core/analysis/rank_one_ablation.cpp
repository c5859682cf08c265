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

// Four float64 lanes (one AVX2 register, two SSE2 ones; GCC and Clang vector extensions, so no
// intrinsics).
typedef double Lanes4 __attribute__((vector_size(32)));
constexpr int64_t kLanes = 4;

// Classes per block of the CP pair kernel: three four-lane accumulators (spelled out in the
// kernel), so that ten classes take one pass over the rank; the classes left over go four at a
// time, so U_Oᵀ is padded to a multiple of four.
constexpr int64_t kClassBlock = 3 * kLanes;

// The CP factors the pair kernel reads, row-major float64: contexts v [B, R], U_m [N, R], and
// U_Oᵀ [R, padded], its columns zero-padded to a multiple of kLanes.
struct CpPairFactors {
  const double* v;
  const double* mode_factor;
  const double* out_by_rank;
  int64_t rank, classes, padded;
};

// out[p, c] = scale[p] Σ_r v[row[p], r] U_m[expert[p], r] U_O[c, r] for pairs [begin, end).
// Each class has its own accumulator lane (no sum is reassociated); written with explicit
// vectors because GCC's -O2 leaves the plain loop scalar (19 ms → 8 ms for 46,200 pairs, R = 64,
// O = 10, one core, two-lane vectors, 2026-11-24). Four lanes, in an AVX2 clone chosen at load
// time: ten classes are three vector products per rank instead of five two-lane ones and a
// second pass for the last two (a softmax N = 128 sweep 25–29 → 17–22 ms, docs/BENCHMARKS.md,
// 2026-11-26). The same bits in every clone: one product and one sum per lane and rank, in rank
// order, and no FMA (the avx2 target does not enable it). Accumulators are named variables, not
// an array: GCC keeps an array of vectors on the stack and the loop then waits on its own stores
// (3.5× slower, measured).
__attribute__((target_clones("avx2", "default"))) void cp_pair_kernel(const CpPairFactors& f, int64_t begin,
                                                                      int64_t end, const int64_t* row,
                                                                      const int64_t* expert, const double* scale,
                                                                      double* out) {
  // Unaligned loads by memcpy into a named vector (a lambda returning a vector would change the
  // ABI between the clones: GCC's -Wpsabi).
  Lanes4 w0, w1, w2;
  for (int64_t p = begin; p < end; ++p) {
    const double* vp = f.v + row[p] * f.rank;
    const double* up = f.mode_factor + expert[p] * f.rank;
    double* op = out + p * f.classes;
    auto store = [&](int64_t c, const Lanes4& sum) {
      for (int64_t j = 0; j < kLanes && c + j < f.classes; ++j) op[c + j] = sum[j] * scale[p];
    };
    int64_t c = 0;
    for (; c + kClassBlock <= f.padded; c += kClassBlock) {
      Lanes4 s0 = {}, s1 = {}, s2 = {};
      for (int64_t r = 0; r < f.rank; ++r) {
        const double x = vp[r] * up[r];
        const Lanes4 xx = {x, x, x, x};
        const double* wr = f.out_by_rank + r * f.padded + c;
        std::memcpy(&w0, wr, sizeof w0);
        std::memcpy(&w1, wr + kLanes, sizeof w1);
        std::memcpy(&w2, wr + 2 * kLanes, sizeof w2);
        s0 += xx * w0;
        s1 += xx * w1;
        s2 += xx * w2;
      }
      store(c, s0);
      store(c + kLanes, s1);
      store(c + 2 * kLanes, s2);
    }
    for (; c < f.padded; c += kLanes) {
      Lanes4 s0 = {};
      for (int64_t r = 0; r < f.rank; ++r) {
        const double x = vp[r] * up[r];
        std::memcpy(&w0, f.out_by_rank + r * f.padded + c, sizeof w0);
        s0 += Lanes4{x, x, x, x} * w0;
      }
      store(c, s0);
    }
  }
}

// One context row b of a CP bound scan over every expert n = 0 … N − 1 (a dense gate's row).
struct CpBoundRow {
  const double* a;         ///< a_n [N]
  const double* inf_norm;  ///< ‖U_m[n]‖∞ [N]
  const double* two_norm;  ///< ‖U_m[n]‖₂ [N]
  int64_t experts;
  double context_two, context_inf;  ///< ‖v_b‖₂, ‖v_b‖∞
  double spread, limit;
};

// Appends to `hits` each n with a_n · min(‖v‖₂‖U_m[n]‖∞, ‖v‖∞‖U_m[n]‖₂) · spread ≥ limit, in
// order: pairs_that_may_change's test, four experts at a time in an AVX2 clone chosen at load time
// (the same products in the same order, so the same pairs; NaN fails the test either way). A
// dense gate's scan was most of a softmax N = 1,024 sweep (26 of 49 ms, 2026-11-26): every
// coefficient is a pair to bound, and almost none passes.
__attribute__((target_clones("avx2", "default"))) void scan_full_cp_row(const CpBoundRow& row,
                                                                        std::vector<int64_t>* hits) {
  const Lanes4 two = {row.context_two, row.context_two, row.context_two, row.context_two};
  const Lanes4 inf = {row.context_inf, row.context_inf, row.context_inf, row.context_inf};
  const Lanes4 spread = {row.spread, row.spread, row.spread, row.spread};
  const Lanes4 limit = {row.limit, row.limit, row.limit, row.limit};
  int64_t n = 0;
  for (; n + kLanes <= row.experts; n += kLanes) {
    Lanes4 a, inf_norm, two_norm;  // unaligned loads
    std::memcpy(&a, row.a + n, sizeof a);
    std::memcpy(&inf_norm, row.inf_norm + n, sizeof inf_norm);
    std::memcpy(&two_norm, row.two_norm + n, sizeof two_norm);
    const Lanes4 first = two * inf_norm, second = inf * two_norm;
    const Lanes4 norm = second < first ? second : first;  // std::min(first, second), lane by lane
    const auto reaches = a * norm * spread >= limit;
    if (!(reaches[0] | reaches[1] | reaches[2] | reaches[3])) continue;
    for (int64_t j = 0; j < kLanes; ++j)
      if (reaches[j]) hits->push_back(n + j);
  }
  for (; n < row.experts; ++n)
    if (row.a[n] * std::min(row.context_two * row.inf_norm[n], row.context_inf * row.two_norm[n]) * row.spread >=
        row.limit)
      hits->push_back(n);
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
    const int64_t padded = (out.size(0) + kLanes - 1) / kLanes * kLanes;
    out_by_rank_ = torch::zeros({out.size(1), padded}, torch::kFloat64);  // [R, O padded to kLanes]
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
  count_ = inputs.size(0);
  if (cp_) {
    auto v = nn::cp_input_side_of(factors_[modes], z, layer_->first_layer()->use_bias());  // [B, R]
    for (int64_t e = 0; e < modes; ++e)
      if (e != mode_) v = v * coefficients[e].matmul(factors_[e]);
    v_ = v.contiguous();
    context_norm_ = bounds ? row_norms(v_) : torch::Tensor();
    return;
  }
  z = layer_->first_layer()->input_with_bias(z);
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
  const int64_t experts = slice_norm_.size(-1);
  std::vector<int64_t> hits;  // of one dense row
  for (int64_t b = 0; b < count_; ++b) {
    const int64_t s = first + b;
    const double limit = limits[b];
    const int64_t begin = coefficients.offsets[s], end = coefficients.offsets[s + 1];
    if (cp_ && end - begin == experts) {
      // Every expert, in order (a dense gate: softmax): the norms are read in order too.
      const CpBoundRow row{coefficients.values.data() + begin, slice, slice + experts, experts,
                           context[2 * b], context[2 * b + 1], class_spread_, limit};
      hits.clear();
      scan_full_cp_row(row, &hits);
      for (const int64_t n : hits) {
        out.rows.push_back(b);
        out.experts.push_back(n);
        out.a.push_back(row.a[n]);
      }
      continue;
    }
    for (int64_t k = begin; k < end; ++k) {
      const int64_t n = coefficients.indices[k];
      const double a = coefficients.values[k];
      const double norm = cp_ ? std::min(context[2 * b] * slice[n], context[2 * b + 1] * slice[experts + n])
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
  slice_norm_ = torch::stack({std::get<0>(u.abs().max(1)), u.norm(2, 1)}, 0).contiguous();  // [2, N]
  mode_factor_ = u;
}

}  // namespace mumoe::analysis
