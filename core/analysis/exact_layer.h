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
};

}  // namespace mumoe::analysis
