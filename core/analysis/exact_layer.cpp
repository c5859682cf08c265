#include "analysis/exact_layer.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

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
  return nn::cp_input_side(layer->factors(), layer->input_with_bias(rows.to(torch::kFloat64)));
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
  auto hidden = nn::cp_input_side(factors, layer->first_layer()->input_with_bias(rows));  // [M, R]
  for (size_t e = 0; e < modes; ++e) hidden = hidden * sparse_rows_times(coefficients[e], factors[e]);
  return hidden.matmul(factors[modes + 1].t());  // [M, O]
}

}  // namespace mumoe::analysis
