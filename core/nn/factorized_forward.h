// Factorised μMoE forward passes as pure functions of the stored factors (spec §1).
//
// Both functions take M rows (batch × tokens flattened), never materialise the weight tensor,
// and contract in the cheap order: the vectors are contracted with their factors first, the
// output factor last. They are free functions so that analysis code can evaluate a layer with
// modified factors (e.g. a zeroed expert) without building a module.
#pragma once

#include <torch/types.h>

#include <vector>

namespace mumoe::nn {

/// CP: y = U_out · (Π_e (U_eᵀ a_e) ⊙ (U_inᵀ z)).
/// factors = {U_1 [N_1,R], …, U_E [N_E,R], U_in [I(+1),R], U_out [O,R]}; z [M, I(+1)]
/// (already extended with the bias column when the layer has one); coefficients[e] [M, N_e].
torch::Tensor cp_forward(const std::vector<torch::Tensor>& factors,
                         const std::vector<torch::Tensor>& coefficients, const torch::Tensor& z);

/// cp_forward in two steps, with the same bits: the input side U_inᵀ z [M, R] (U_in is the
/// second-to-last factor), which needs no coefficients, then the rest from it (extraction computes
/// the two on different threads).
torch::Tensor cp_input_side(const std::vector<torch::Tensor>& factors, const torch::Tensor& z);
/// The input side of a layer with a bias from z [M, I] itself: U_inᵀ [z; 1] = z · U_in[:I] + U_in[I]
/// in one addmm, the bias row as BLAS's C — the same I + 1 terms summed, without copying z into
/// [z; 1] (that copy cost 9 % of a μMoE Mixer's forward pass, docs/BENCHMARKS.md). Without a
/// bias (`use_bias` false), z · U_in. What MultilinearLayerImpl::forward computes for CP layers.
torch::Tensor cp_input_side_of(const torch::Tensor& input_factor, const torch::Tensor& z, bool use_bias);
torch::Tensor cp_forward_from_input_side(const std::vector<torch::Tensor>& factors,
                                         const std::vector<torch::Tensor>& coefficients,
                                         const torch::Tensor& input_side);

/// TR: y_o = Σ_{r1,r_last} F_out[r_last,o,r1] · ((F_1 ×₂ a_1) ⋯ (F_E ×₂ a_E)(F_in ×₂ z))[r1,r_last].
/// factors = {F_1 [R1,N_1,R2], …, F_in [.,I(+1),.], F_out [R_last,O,R1]}; shapes as for cp_forward.
torch::Tensor tr_forward(const std::vector<torch::Tensor>& factors,
                         const std::vector<torch::Tensor>& coefficients, const torch::Tensor& z);

/// Appends the constant-1 column that folds the bias into the input mode: [M,I] → [M,I+1].
torch::Tensor with_bias_column(const torch::Tensor& z);

}  // namespace mumoe::nn
