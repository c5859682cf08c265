// A μMoE layer as the analyses evaluate it: the model's own gates, the expert arithmetic in
// float64.
//
// Why split the precision:
//   * The gates (projection, normalisation, entmax/softmax) run in the model's dtype on the rows
//     rounded to it, so the coefficients the analyses store and use are, bit for bit, the ones the
//     model computes — and cost what the model's forward pass costs (extraction's overhead over
//     the bare forward was mostly the gates redone in float64).
//   * The expert arithmetic (factors, input LayerNorm, GELU) runs in float64, so that every
//     ablation method (rank-one corrections, re-evaluated rows, the naive oracle) computes the
//     same predictions: their results differ by rounding (~1e-16 of the scores), not by a float32
//     near-tie.
// Removing an expert (W_n := 0) leaves the gates untouched (no renormalisation), so every method
// may reuse stored coefficients; the naive oracle recomputes them here, on the extraction's chunks,
// which gives the same bits.
//
// Threads: once float64_layer() has been called (after that it only reads), coefficients() and
// input_side() on one thread and output_from_coefficients() or output_from_input_side() on another
// may run at once — they only read the two copies (extraction's two stages, extraction.cpp).
// Beyond that pairing, no function may run on two threads at once, forward() included.
#pragma once

#include <torch/types.h>

#include <vector>

#include "nn/mumoe_block.h"

namespace mumoe::analysis {

class ExactLayer {
 public:
  /// An independent copy of `layer` on `device` in the layer's own dtype (float32 or float64; any
  /// other is evaluated in float32), and from it, on first use, a float64 copy for the expert
  /// arithmetic (widening is exact, so it holds the model's values). The model's layer is never
  /// touched.
  ExactLayer(const nn::MuMoEBlock& layer, const torch::Device& device);

  /// The coefficients (the model's own, in its dtype; widening them to float64 is exact) and the
  /// float64 output of rows [M, I] of any floating dtype (float32 rows, as stored, are rounded to
  /// nothing). The gates run on one OpenMP thread, so they give the same bits whoever calls and
  /// whatever its team size (the naive oracle recomputes what extraction stored).
  nn::BlockOutput forward(const torch::Tensor& rows);

  /// forward()'s coefficients alone (the gates, without the expert arithmetic): the same bits.
  std::vector<torch::Tensor> coefficients(const torch::Tensor& rows);

  /// The float64 output from given coefficients (per mode [M, N_e], any floating dtype, exactly
  /// widened): the arithmetic forward() uses, for re-evaluating rows with some coefficients at 0.
  /// A single CP layer with entmax gates and finite factors sums its mode products over the non-zero
  /// coefficients only (sums_over_nonzero_coefficients()); other layers use the float64 copy's
  /// output_from_coefficients. The two differ from each other by rounding only.
  torch::Tensor output_from_coefficients(const torch::Tensor& rows, const std::vector<torch::Tensor>& coefficients);

  /// Whether output_from_coefficients takes the sparse path.
  bool sums_over_nonzero_coefficients() const { return sparse_modes_; }

  /// Whether output_from_coefficients splits into input_side() and output_from_input_side(): a
  /// single CP layer without input LayerNorm, off the sparse path. Then
  /// output_from_input_side(input_side(rows), c) == output_from_coefficients(rows, c), bit for bit
  /// (the same operations: nn::cp_forward is made of the two).
  bool splits_input_side() const { return splits_input_side_; }
  /// The float64 input side U_inᵀ z̃ [M, R] of rows [M, I] (z̃ with the bias column, if any): the
  /// part of the expert arithmetic that needs no coefficients (extraction computes it beside the
  /// gates and the rest on its writer thread). std::logic_error unless splits_input_side().
  torch::Tensor input_side(const torch::Tensor& rows);
  /// The float64 output from an input side [M, R] (float64, as input_side gives) and the
  /// coefficients of the same M rows (as output_from_coefficients); std::invalid_argument for
  /// other shapes.
  torch::Tensor output_from_input_side(const torch::Tensor& input_side, const std::vector<torch::Tensor>& coefficients);

  /// Whether extraction stores this layer's class scores from the float32 arithmetic
  /// (certified_scores): a single CP layer without input LayerNorm whose gates are float32 and
  /// not entmax (those take the sparse float64 path, which costs no more than the bare forward),
  /// on the CPU (a GPU's float32 products may run in lower precision). The static form decides
  /// it from the model's layer (what the run key records), the member for this copy.
  static bool certifies_float32_scores(const nn::MuMoEBlock& layer, const torch::Device& device);
  bool certifies_float32_scores() const { return float32_scores_; }
  /// Whether this layer's kind stores float32 scores when extracted on the CPU, so that its runs
  /// may hold them (whatever device this copy is on): float32_score_error is defined.
  bool has_float32_score_bound() const { return float32_score_bound_; }
  /// The float32 input side U_inᵀ z̃ [M, R] of rows [M, I], from the model's own factors (what
  /// the model's forward computes first). std::logic_error unless certifies_float32_scores().
  torch::Tensor float32_input_side(const torch::Tensor& rows);
  /// Rows closer than this many bounds to a tie get the float64 arithmetic's scores. 2 would
  /// decide every argmax; more keeps expert removals from bringing float32 rows within a tie,
  /// which the ablation then re-evaluates in full. The project's trained softmax heads
  /// (2026-11-27, N = 128 / 1,024 experts, 10,000 rows): with 2, 7 / 42 float64 rows and 307 /
  /// 253 pairs of a sweep re-evaluated; with 4, 17 / 91 rows and 102 / 12 pairs; with 8, 37 /
  /// 161 rows (each chunk holding one pays the float64 pass's per-call cost) and 24 / 5 pairs.
  static constexpr double kFloat64Margin = 4;
  /// Class scores float64 [M, O] on the CPU for rows [M, I], their float32_input_side (undefined:
  /// computed here) and coefficients (the gates' float32 values): the model's own float32 output,
  /// widened — except rows whose two largest scores lie within kFloat64Margin × float32_score_error
  /// of each other, which are the float64 arithmetic's (output_from_coefficients). Each score of
  /// a float32 row lies within float32_score_error of the exact value, so beyond twice that its
  /// argmax is the exact one and the float64 arithmetic's (the naive oracle's). Why: the float64
  /// arithmetic was most of a dense gate's extraction beyond the bare forward
  /// (docs/BENCHMARKS.md, issue 15); "float64 where ties demand it".
  /// `errors`: the rows' float32_score_errors, or empty (computed here); either part may be
  /// computed on another thread (extraction balances its two stages so).
  torch::Tensor certified_scores(const torch::Tensor& rows, const torch::Tensor& float32_input_side,
                                 const std::vector<torch::Tensor>& coefficients, std::vector<double> errors = {});
  /// float32_score_error of each of the rows [M, I] with their coefficients (per mode [M, N_e]).
  std::vector<double> float32_score_errors(const torch::Tensor& rows, const std::vector<torch::Tensor>& coefficients) const;
  /// A rigorous bound on |ŷ_o − y_o| for every class o, where y is the exact output of the
  /// float32 inputs, factors and coefficients and ŷ either the float32 or the float64 arithmetic's
  /// (nn::cp_forward's order, any summation order within a product, fused or not): the classic
  /// bound γ_T Σ_r |U_O[o,r]| |z̃|ᵀ|U_in[:,r]| Π_e |a_e|ᵀ|U_e[:,r]| (T = I' + Σ N_e + E + R terms;
  /// γ_T = T u / (1 − T u), u the unit roundoff), majorised by Cauchy–Schwarz and Hölder so that
  /// it needs only the row's norms — ‖z̃‖₂ (`input_row`, I float32 values; the bias column is
  /// added here) and `mode_masses`, ‖a_e‖₁ for each of the E modes — plus a term for products
  /// that underflow. On the project's trained softmax heads it is 0.07–0.3 % of the largest
  /// score, where the error itself is ~1e-6 of it (2026-11-27). std::logic_error unless
  /// has_float32_score_bound().
  double float32_score_error(const float* input_row, const double* mode_masses) const;

  /// The float64 copy, made on first use: its factors (zeroed by the naive oracle; the sparse path
  /// reads them at every call).
  nn::MuMoEBlock float64_layer();
  /// The copy in the gate dtype: the model's values, never modified (the rank-one engine widens
  /// what it reads of it — a click need not write a float64 copy of the whole layer).
  const nn::MuMoEBlock& gate_layer() const { return gates_; }

 private:
  torch::Tensor cp_output_from_sparse_coefficients(const torch::Tensor& rows,
                                                  const std::vector<torch::Tensor>& coefficients);

  nn::MuMoEBlock gates_{nullptr};       ///< the layer in its gate dtype
  nn::MuMoEBlock arithmetic_{nullptr};  ///< float64, made by float64_layer() on first use
  torch::Device device_;
  torch::Dtype gate_dtype_;
  bool sparse_modes_ = false;  ///< single CP layer, entmax gates, finite factors, on the CPU
  bool splits_input_side_ = false;  ///< single CP layer, no input LayerNorm, not sparse_modes_
  bool float32_scores_ = false;       ///< certifies_float32_scores(layer, device)
  bool float32_score_bound_ = false;  ///< certifies_float32_scores(layer, CPU): the constants below are set
  /// float32_score_error's constants: (γ_T(2⁻²⁴) + γ_T(2⁻⁵³)) · max_o Σ_r |U_O[o,r]| ‖U_in[:,r]‖₂ Π_e max_n |U_e[n,r]|;
  /// for the underflow term max_o Σ_r |U_O[o,r]|, max_r ‖U_in[:,r]‖₂, max_{n,r} |U_e[n,r]| per mode, T and R.
  double score_error_scale_ = 0, out_reach_ = 0, input_reach_ = 0;
  std::vector<double> mode_reach_;
  int64_t terms_ = 0, rank_ = 0;
  bool use_bias_ = false;
  int64_t input_dim_ = 0;
};

}  // namespace mumoe::analysis
