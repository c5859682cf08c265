// Expert removal as a low-rank correction of cached outputs (issue 15), for a μMoE layer whose
// output is linear in each mode's coefficients: one CP or TR layer, any number of expert modes
// (not a two-layer block: the GELU between its layers makes it nonlinear).
//
// With everything but mode m's coefficients held fixed (the sample's "context"), the layer is a
// linear map of a = a^(m), so zeroing the coefficients of a set of experts changes the output by
//   CP:  Δ = ((w U_m) ⊙ v) U_Oᵀ            v = (z̃ U_z) ⊙ Π_{e≠m} (a^(e) U_e)        [R]
//   TR:  Δ = vec(L · F_m(w) · R) · Out     L = Π_{e<m} F_e(a^(e)),  R = Π_{e>m} F_e(a^(e)) · F_z(z̃)
// where w holds a_n for the removed experts and 0 elsewhere (F(w) = Σ_n w_n F[:, n, :]); the
// output after removal is y − Δ, y being the output stored by extraction. A single expert is the
// rank-one case w = a_n e_n. Cost per (sample, expert) pair: R·O multiply-adds instead of a
// pass of the whole layer.
//
// Each pair also has a cheap upper bound on how far Δ can move any class score relative to the
// predicted one (Cauchy–Schwarz on the factors' norms): where it is below the sample's top-two
// margin the prediction cannot change and nothing is computed (CounterfactualAblation prunes
// that way and re-evaluates near-ties exactly, so the predictions equal the naive oracle's).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "cache/analysis_cache.h"
#include "nn/mumoe_block.h"

namespace mumoe::analysis {

/// One engine serves one thread at a time: set_contexts replaces state, and the const methods
/// fill lazily widened factors on first use.
class RankOneAblation {
 public:
  /// True for a single CP or TR layer (not a two-layer block).
  static bool supports(const nn::MuMoEBlock& layer);

  /// `layer`: a copy of the model's layer in float32 or float64 that nobody modifies (ExactLayer's
  /// gate_layer()); `mode`: the expert mode whose experts are removed. Everything is computed in
  /// float64: the factors are widened (exactly) when the engine is made — but a CP mode factor,
  /// the largest ([N, R]), only in the rows a set correction uses, and whole (with its bound
  /// norms) when pairs are first asked for: a click need not write memory the size of the layer.
  RankOneAblation(const nn::MuMoEBlock& layer, int64_t mode);

  /// Computes the contexts of B samples: `inputs` [B, I] (the layer's stored inputs, float64)
  /// and their dense coefficients per mode ([B, N_e] each, float64; the removed mode's own may
  /// be undefined: it is not part of the context). Replaces earlier contexts; the row numbers
  /// below index these B samples. `bounds`: also the contexts' norms, which only
  /// pairs_that_may_change reads (a click's set_deltas does not).
  void set_contexts(const torch::Tensor& inputs, const std::vector<torch::Tensor>& coefficients, bool bounds = true);
  int64_t context_count() const { return count_; }

  /// Δ of removing one expert per pair: context rows `rows` (long [P]), `experts` (long [P])
  /// with coefficients `a` (float64 [P]) → [P, O].
  torch::Tensor pair_deltas(const torch::Tensor& rows, const torch::Tensor& experts, const torch::Tensor& a) const;
  /// Δ of removing the experts `experts` (long [K]) from every context row: `weights` [B, K]
  /// holds each row's a_n of those experts (0 where the row does not use one) → [B, O]. Only the
  /// K removed experts' factor slices take part (a click removes one of up to thousands).
  torch::Tensor set_deltas(const torch::Tensor& experts, const torch::Tensor& weights) const;
  /// The (sample, expert) pairs whose removal may change a prediction (contexts set with
  /// `bounds`; std::logic_error otherwise), among the non-zero
  /// coefficients of the mode (`coefficients`, CSR by sample) of the context samples
  /// first … first + context_count() − 1: those whose bound on max_c |Δ_c − Δ_p| reaches the
  /// sample's `limits[b]` (its top-two margin less the tie tolerance). One pass over the
  /// coefficients in plain C++: with dense gates (softmax) this scan is most of a sweep.
  struct Pairs {
    std::vector<int64_t> rows, experts;  ///< context row b, expert n
    std::vector<double> a;               ///< a_n of the pair
  };
  Pairs pairs_that_may_change(const cache::SparseRows& coefficients, int64_t first, const double* limits) const;

 private:
  /// pair_deltas of a CP layer on the CPU, as plain loops (why: in the .cpp).
  torch::Tensor cp_pair_deltas_cpu(const torch::Tensor& rows, const torch::Tensor& experts,
                                   const torch::Tensor& a) const;
  /// CP: rows `experts` of U_m, widened to float64 [K, R].
  torch::Tensor mode_rows(const torch::Tensor& experts) const;
  /// CP: makes mode_factor_ and slice_norm_ (what pairs read) on first call.
  void widen_mode_factor() const;

  bool cp_;
  int64_t mode_;
  int64_t count_ = 0;
  nn::MuMoEBlock layer_{nullptr};
  /// Of the (only) layer, float64 (for a float64 layer the layer's own tensors, not copies:
  /// nothing modifies them); CP: undefined for mode m.
  std::vector<torch::Tensor> factors_;
  torch::Tensor mode_source_;           ///< CP: U_m [N, R] in the layer's dtype (not copied)
  torch::Tensor input_ln_weight_, input_ln_bias_;  ///< the layer's input LayerNorm, float64 (if any)
  double input_ln_eps_ = 0;
  bool input_ln_ = false;
  torch::Tensor out_flat_;              ///< CP: U_O [O, R]; TR: Out as [R1·R_last, O]
  torch::Tensor out_by_rank_;  ///< CP, CPU: U_Oᵀ [R, O'], zero-padded to a multiple of four classes
  mutable torch::Tensor mode_factor_;  ///< CP, CPU: U_m [N, R] float64, contiguous (widen_mode_factor)
  double class_spread_ = 0;             ///< max over classes c, p of ‖Out_c − Out_p‖₂
  /// Per expert (CPU float64): CP ‖U_m[n]‖∞ and ‖U_m[n]‖₂ as rows of [2, N] (widen_mode_factor;
  /// each kind contiguous, so a dense gate's bound scan reads them in order); TR ‖F_m[:, n, :]‖_F [N].
  mutable torch::Tensor slice_norm_;
  // Contexts. CP: v [B, R] and its norms; TR: L [B, R1, Ra], R [B, Rb, R_last] and their norms.
  torch::Tensor v_, left_, right_;
  /// CPU float64. CP: [B, 2] (‖v‖₂, ‖v‖∞); TR: [B] ‖L‖_F·‖R‖_F. Undefined unless the contexts
  /// were set with `bounds`.
  torch::Tensor context_norm_;
};

}  // namespace mumoe::analysis
