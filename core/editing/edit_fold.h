// Folding logit edits exactly into a μMoE layer's weights, so that the plain forward pass of
// the exported model equals the live-edited model (spec §5).
//
// Each edit adds λ āₙ to the bias row of output o of every expert n: W[n, I, o] += λ āₙ
// (z' = [z; 1], so Σₙ aₙ W[n, I, o] is a per-sample bias of aₙ-weighted experts).
//  * CP: one rank-1 component per edit, (λā) ∘ 1 ∘ … ∘ e_I ∘ e_o (rank R → R + edits): later
//    expert modes get all-ones factors, which contribute Σ a_e = 1 (entmax and softmax sum to 1).
//  * TR: every ring rank grows by one per edit, and each core gets the edit as a new 1 × 1
//    diagonal block (expert core: λāₙ; later expert cores: 1; input core: 1 at the bias row,
//    0 elsewhere; output core: 1 at o). With all off-diagonal blocks zero, the trace of the
//    ring product splits into the old layer's output plus λ āᵀa on output o — exact, for any
//    ranks (a tensor train, R1 = 1, becomes a tensor ring with R1 = 1 + edits).
//  * Two-layer blocks: the edit goes into the second layer; the first layer gets the same rank
//    growth (both layers share the configuration) with zero components, which change nothing.
// Requires use_bias (the bias row); throws UsageError otherwise.
//
// Router layers (nn/moe_layer.h): the output is Σ_n Σ_p C[n, p] E_n(slot_{n,p}) and an expert's
// coefficient is a_n = Σ_p C[n, p] (its combine weights summed over its slots; 0 for a dropped
// sample), so adding λ āₙ to output o of expert n's output bias (experts_b2, or experts_b1 for
// linear experts) adds exactly Σ_n a_n λ āₙ = λ āᵀa to y_o — for every router, Soft MoE included.
// No configuration changes.
#pragma once

#include <vector>

#include "editing/logit_edit.h"
#include "nn/moe_layer.h"
#include "nn/mumoe_block.h"

namespace mumoe::editing {

/// The configuration after folding `edits` edits (ranks grown as described above).
nn::LayerConfig folded_config(const nn::LayerConfig& config, int64_t edits);

/// A new block (same dtype and device as `block`, eval mode) with the edits folded in; gating,
/// normalisation statistics and input LayerNorm are copied unchanged.
nn::MuMoEBlock fold_edits(const nn::MuMoEBlock& block, const std::vector<LogitEdit>& edits);

/// A copy of the router layer (same dtype and device, eval mode) with the edits folded into its
/// experts' output biases.
nn::MoELayer fold_edits(const nn::MoELayer& layer, const std::vector<LogitEdit>& edits);

}  // namespace mumoe::editing
