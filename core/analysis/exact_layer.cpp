#include "analysis/exact_layer.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "analysis/row_norms.h"
#include "nn/cpu_team.h"
#include "nn/factorized_forward.h"

namespace mumoe::analysis {
namespace {

// Eight float64 lanes (GCC and Clang vector extensions, so no intrinsics): one AVX-512
// instruction, two AVX2 ones or four SSE2 ones, by the clone chosen at load time.
typedef double Lanes8 __attribute__((vector_size(64)));

// out[0, r) += v · row[0, r). GCC's -O2 leaves the plain loop scalar. Each out[j] is still one
// product and one sum, rounded as in the scalar loop and in the same order over the coefficients,
// so every clone gives the same bits: no FMA — the avx512f target enables FMA, and GCC would
// contract the product and the sum into one (seen in the object code), hence fp-contract=off. A
// rank-512 head's extraction spent 18 % of its time in the scalar loop; eight lanes took 16 %
// fewer profile samples than four on an AVX-512 VM (docs/BENCHMARKS.md, 2026-11-26).
// GCC takes fp-contract as a function attribute; clang (the fuzzing build) as a pragma in the body.
#ifdef __clang__
#define MUMOE_CLONES_WITHOUT_FMA __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MUMOE_CLONES_WITHOUT_FMA __attribute__((target_clones("avx512f", "avx2", "default"), optimize("fp-contract=off")))
#endif
MUMOE_CLONES_WITHOUT_FMA void add_scaled_row(double* out, const double* row, double v, int64_t r) {
#ifdef __clang__
#pragma clang fp contract(off)
#endif
  const Lanes8 scale = {v, v, v, v, v, v, v, v};
  int64_t j = 0;
  for (; j + 8 <= r; j += 8) {
    Lanes8 sum, w;
    std::memcpy(&sum, out + j, sizeof sum);  // unaligned loads and store
    std::memcpy(&w, row + j, sizeof w);
    sum += scale * w;
    std::memcpy(out + j, &sum, sizeof sum);
  }
  for (; j < r; ++j) out[j] += v * row[j];
}

// out [M, R] += a [M, N] · u [N, R] over a's non-zero entries only (NaN included, so it still
// reaches the output as in a dense product).
template <typename T>
void add_sparse_rows_times(const T* a, int64_t m, int64_t n, const double* u, int64_t r, double* out) {
  for (int64_t i = 0; i < m; ++i, a += n, out += r)
    for (int64_t k = 0; k < n; ++k) {
      if (a[k] == 0) continue;
      // exact widening of the model's coefficient
      add_scaled_row(out, u + k * r, static_cast<double>(a[k]), r);
    }
}

// a [M, N] (the gate's dtype) times a float64 factor [N, R], as float64 [M, R].
torch::Tensor sparse_rows_times(const torch::Tensor& a, const torch::Tensor& factor) {
  const auto rows = a.cpu().contiguous();
  const auto u = factor.cpu().contiguous();
  auto out = torch::zeros({rows.size(0), u.size(1)}, torch::kFloat64);
  if (rows.scalar_type() == torch::kFloat32)
    add_sparse_rows_times(rows.data_ptr<float>(), rows.size(0), rows.size(1), u.data_ptr<double>(), u.size(1),
                          out.data_ptr<double>());
  else
    add_sparse_rows_times(rows.to(torch::kFloat64).data_ptr<double>(), rows.size(0), rows.size(1),
                          u.data_ptr<double>(), u.size(1), out.data_ptr<double>());
  return out.to(factor.device());
}

}  // namespace

namespace {

// The coefficients in float64 (exact widening of the gate's float32 or float64 values).
std::vector<torch::Tensor> widened(const std::vector<torch::Tensor>& coefficients) {
  std::vector<torch::Tensor> wide;
  for (const auto& a : coefficients) wide.push_back(a.to(torch::kFloat64));
  return wide;
}

torch::Dtype gate_dtype_of(const nn::MuMoEBlock& layer) {
  const auto dtype = layer->parameters().front().scalar_type();  // projs.0, the first gate's weights
  return dtype == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
}

template <typename T>
bool all_finite(const T* values, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    if (!std::isfinite(values[i])) return false;
  return true;
}

// A plain loop over the model's own factors: torch::isfinite(t).all() allocates temporaries the
// size of the factors (abs, two masks), and first-touching that much fresh memory cost 17 ms of a
// rank-512 head's first ablation click on this project's VMs (2026-11-25).
bool all_finite(const std::vector<torch::Tensor>& tensors) {
  for (const auto& t : tensors) {
    const auto c = (t.scalar_type() == torch::kFloat32 || t.scalar_type() == torch::kFloat64) ? t.cpu().contiguous()
                                                                                              : t.to(torch::kCPU, torch::kFloat64).contiguous();
    const bool finite = c.scalar_type() == torch::kFloat32 ? all_finite(c.data_ptr<float>(), c.numel())
                                                           : all_finite(c.data_ptr<double>(), c.numel());
    if (!finite) return false;
  }
  return true;
}

}  // namespace

ExactLayer::ExactLayer(const nn::MuMoEBlock& layer, const torch::Device& device)
    : device_(device), gate_dtype_(gate_dtype_of(layer)) {
  gates_ = nn::copy_block(layer, gate_dtype_, device);
  const auto& c = layer->config();
  // A non-finite factor row of an expert no sample uses still makes the dense product NaN (0 · inf),
  // as in the model's own forward, which extraction reports; the sparse path would skip it.
  sparse_modes_ = c.factorization == nn::Factorization::CP && !c.is_block() && !c.input_layer_norm &&
                  c.gate_activation == nn::GateActivationKind::Entmax15 && device.is_cpu() &&
                  all_finite(layer->first_layer()->factors());  // widening keeps (non-)finiteness
  splits_input_side_ = c.factorization == nn::Factorization::CP && !c.is_block() && !c.input_layer_norm && !sparse_modes_;
  // The bound's constants wherever the layer's kind may hold float32 scores: an ablation on a GPU
  // reads runs extracted on the CPU.
  float32_score_bound_ = certifies_float32_scores(layer, torch::kCPU);
  float32_scores_ = float32_score_bound_ && device.is_cpu();
  if (float32_score_bound_) {
    const auto first = gates_->first_layer();
    use_bias_ = first->use_bias();
    input_dim_ = c.input_dim;
    // The majorants of float32_score_error, in float64 (their own rounding, relative ~1e-14, is
    // covered by the factor 1 + 1e-6 below).
    std::vector<torch::Tensor> factors;  // U_1 … U_E, U_in, U_O
    for (const auto& f : first->factors()) factors.push_back(f.to(torch::kCPU, torch::kFloat64));
    const size_t modes = factors.size() - 2;
    const auto input_norms = factors[modes].norm(2, {0});  // ‖U_in[:, r]‖₂ [R]
    auto per_rank = input_norms;
    terms_ = factors[modes].size(0) + factors[modes + 1].size(1) + static_cast<int64_t>(modes);
    rank_ = factors[modes + 1].size(1);
    mode_reach_.clear();
    for (size_t e = 0; e < modes; ++e) {
      const auto largest = std::get<0>(factors[e].abs().max(0));  // max_n |U_e[n, r]| [R]
      per_rank = per_rank * largest;
      mode_reach_.push_back(largest.max().item<double>());
      terms_ += factors[e].size(0);
    }
    const auto out = factors[modes + 1].abs();  // |U_O| [O, R]
    const double reach = (out * per_rank).sum(1).max().item<double>();
    out_reach_ = out.sum(1).max().item<double>();
    input_reach_ = input_norms.max().item<double>();
    const auto gamma = [&](double unit) { return terms_ * unit / (1 - terms_ * unit); };
    score_error_scale_ = (gamma(std::ldexp(1.0, -24)) + gamma(std::ldexp(1.0, -53))) * reach * (1 + 1e-6);
  }
}

bool ExactLayer::certifies_float32_scores(const nn::MuMoEBlock& layer, const torch::Device& device) {
  const auto& c = layer->config();
  return c.factorization == nn::Factorization::CP && !c.is_block() && !c.input_layer_norm &&
         c.gate_activation != nn::GateActivationKind::Entmax15 && device.is_cpu() &&
         gate_dtype_of(layer) == torch::kFloat32;
}

double ExactLayer::float32_score_error(const float* input_row, const double* mode_masses) const {
  if (!float32_score_bound_) throw std::logic_error("ExactLayer::float32_score_error: this layer has no float32 scores");
  const double norm = std::sqrt(sum_of_squares(input_row, input_dim_) + (use_bias_ ? 1.0 : 0.0));  // with the bias column
  double mass = 1, gain = (1 + out_reach_) * (1 + norm * input_reach_);
  for (size_t e = 0; e < mode_reach_.size(); ++e) {
    mass *= mode_masses[e];
    gain *= 1 + mode_masses[e] * mode_reach_[e];
  }
  // Underflow: a product (or fused multiply-add) whose result is subnormal errs by up to 2⁻¹⁵⁰
  // absolutely, beyond the relative bound (a sum of floats that is subnormal is exact). At most
  // T·R of them reach an output, each amplified by no more than `gain` (the majorants of the
  // factors it passes through); the factor 2 covers the (1 + γ) terms of the amplification.
  const double underflow = 2 * std::ldexp(1.0, -150) * static_cast<double>(terms_ * rank_) * gain;
  return score_error_scale_ * norm * mass + underflow;
}

torch::Tensor ExactLayer::float32_input_side(const torch::Tensor& rows) {
  if (!float32_scores_) throw std::logic_error("ExactLayer::float32_input_side: this layer's scores are not float32");
  const auto layer = gates_->first_layer();
  return layer->cp_input_side(rows.to(device_).to(torch::kFloat32));
}

std::vector<double> ExactLayer::float32_score_errors(const torch::Tensor& rows,
                                                    const std::vector<torch::Tensor>& coefficients) const {
  if (!float32_scores_) throw std::logic_error("ExactLayer::float32_score_errors: this layer's scores are not float32");
  const int64_t count = rows.size(0);
  // ‖a_e‖₁ per row and mode, in plain loops: tensor ops here (widen, abs, sum) wrote three fresh
  // copies of a dense gate's coefficients per chunk and cost as much as the products.
  const int64_t modes = static_cast<int64_t>(coefficients.size());
  std::vector<double> masses(static_cast<size_t>(count * modes));
  for (int64_t e = 0; e < modes; ++e) {
    const auto a = coefficients[e].to(torch::kCPU, torch::kFloat32).contiguous();
    const int64_t experts = a.size(1);
    const auto* v = a.data_ptr<float>();
    for (int64_t b = 0; b < count; ++b, v += experts) masses[b * modes + e] = sum_of_abs(v, experts);
  }
  const auto inputs = rows.to(torch::kCPU, torch::kFloat32).contiguous();
  const auto* x = inputs.data_ptr<float>();
  std::vector<double> errors(static_cast<size_t>(count));
  for (int64_t b = 0; b < count; ++b) errors[b] = float32_score_error(x + b * input_dim_, masses.data() + b * modes);
  return errors;
}

torch::Tensor ExactLayer::certified_scores(const torch::Tensor& rows, const torch::Tensor& float32_input_side,
                                           const std::vector<torch::Tensor>& coefficients, std::vector<double> errors) {
  if (!float32_scores_) throw std::logic_error("ExactLayer::certified_scores: this layer's scores are not float32");
  const int64_t count = rows.size(0);
  if (errors.empty()) errors = float32_score_errors(rows, coefficients);
  if (static_cast<int64_t>(errors.size()) != count)
    throw std::invalid_argument("ExactLayer::certified_scores: " + std::to_string(errors.size()) +
                                " error bounds for " + std::to_string(count) + " rows");
  // nn::cp_forward's second half on the model's float32 factors: the model's own output.
  const auto side = float32_input_side.defined() ? float32_input_side : this->float32_input_side(rows);
  auto scores = nn::cp_forward_from_input_side(gates_->first_layer()->factors(), coefficients, side)
                    .to(torch::kCPU, torch::kFloat64)
                    .contiguous();
  const int64_t classes = scores.size(1);
  if (classes < 2) return scores;  // a single score has no rival to tie with
  const auto* y = scores.data_ptr<double>();
  std::vector<int64_t> uncertain;
  for (int64_t b = 0; b < count; ++b) {
    const auto top = top_two(y + b * classes, classes);
    // (Written so that a NaN gap or bound counts as uncertain.)
    if (!(top.first - top.second > kFloat64Margin * errors[b])) uncertain.push_back(b);
  }
  if (uncertain.empty()) return scores;
  const auto which = torch::tensor(uncertain, torch::kLong);
  std::vector<torch::Tensor> picked;
  for (const auto& a : coefficients) picked.push_back(a.index_select(0, which.to(a.device())));
  scores.index_copy_(0, which, output_from_coefficients(rows.index_select(0, which.to(rows.device())), picked).cpu());
  return scores;
}

nn::MuMoEBlock ExactLayer::float64_layer() {
  // Made when first needed: writing a float64 copy of a rank-512, 1,024-expert layer (5 MB of
  // memory the process had never touched) took 13–20 ms of a first ablation click on this
  // project's VMs, and a click's rank-one correction reads gate_layer() instead (2026-11-25).
  // From the gate-dtype copy: float32 (or float64) → float64 is exact, so these are the model's values.
  if (arithmetic_.is_empty()) arithmetic_ = nn::copy_block(gates_, torch::kFloat64, device_);
  return arithmetic_;
}

std::vector<torch::Tensor> ExactLayer::coefficients(const torch::Tensor& rows) {
  // The same bits for every caller (the naive oracle and the loader of a run that left a dense
  // gate's coefficients to the model recompute what extraction computed): the gate's ops are
  // elementwise or order-free (max, top-k, a row's cumsum) except the product, and OpenBLAS
  // splits a product's rows and columns among its threads, never the sum; one OpenMP thread here
  // rules out ATen splitting anything by the caller's team size.
  const nn::AtenTeam one_team(1);
  // Stored inputs are float32, so rounding float64 rows back to the gate's dtype is exact.
  return gates_->coefficients(rows.to(device_).to(gate_dtype_));
}

nn::BlockOutput ExactLayer::forward(const torch::Tensor& rows) {
  nn::BlockOutput out;
  out.coefficients = coefficients(rows);
  out.output = output_from_coefficients(rows, out.coefficients);
  return out;
}

torch::Tensor ExactLayer::input_side(const torch::Tensor& rows) {
  if (!splits_input_side_) throw std::logic_error("ExactLayer::input_side: this layer's arithmetic does not split");
  // As MultilinearLayerImpl::forward prepares its input, then the first half of nn::cp_forward.
  const auto layer = float64_layer()->first_layer();
  return layer->cp_input_side(rows.to(torch::kFloat64));
}

torch::Tensor ExactLayer::output_from_input_side(const torch::Tensor& input_side,
                                                 const std::vector<torch::Tensor>& coefficients) {
  if (!splits_input_side_)
    throw std::logic_error("ExactLayer::output_from_input_side: this layer's arithmetic does not split");
  const auto rank = gates_->config().cp_rank;
  const bool fits = input_side.dim() == 2 && input_side.size(1) == rank &&
                    input_side.scalar_type() == torch::kFloat64 && !coefficients.empty() &&
                    std::all_of(coefficients.begin(), coefficients.end(), [&](const torch::Tensor& a) {
                      return a.dim() == 2 && a.size(0) == input_side.size(0);
                    });
  if (!fits)  // a mismatch would broadcast silently (one row against many)
    throw std::invalid_argument("ExactLayer::output_from_input_side: the input side is not float64 [M, " +
                                std::to_string(rank) + "] for the coefficients' M rows");
  return nn::cp_forward_from_input_side(float64_layer()->first_layer()->factors(), widened(coefficients), input_side);
}

torch::Tensor ExactLayer::output_from_coefficients(const torch::Tensor& rows,
                                                   const std::vector<torch::Tensor>& coefficients) {
  const auto x = rows.to(torch::kFloat64);
  if (sparse_modes_) return cp_output_from_sparse_coefficients(x, coefficients);
  return float64_layer()->output_from_coefficients(x, widened(coefficients));
}

torch::Tensor ExactLayer::cp_output_from_sparse_coefficients(const torch::Tensor& rows,
                                                              const std::vector<torch::Tensor>& coefficients) {
  // The CP layer (factorized_forward.h's cp_forward) with each mode product a_e U_e summed over
  // the non-zero coefficients: an entmax gate leaves ~97 % of them at 0, which a dense float64
  // product would multiply (and widen) anyway. The factors are read at every call, so slices the
  // naive oracle zeroed are seen.
  const auto layer = float64_layer();
  const auto factors = layer->first_layer()->factors();
  const size_t modes = coefficients.size();
  auto hidden = layer->first_layer()->cp_input_side(rows);  // [M, R]
  for (size_t e = 0; e < modes; ++e) hidden = hidden * sparse_rows_times(coefficients[e], factors[e]);
  return hidden.matmul(factors[modes + 1].t());  // [M, O]
}

}  // namespace mumoe::analysis
