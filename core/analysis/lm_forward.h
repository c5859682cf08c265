// One pass of the μMoE GPT that keeps what the analysis of MLP block L needs: the block's input
// h_L (the residual stream after attention), its output x_{L+1}, its expert coefficients and the
// logits. Token extraction (the cache) and ablation (the baseline) both call it, so the
// coefficients stored for galleries are exactly the ones ablation decides "affected" with.
#pragma once

#include <torch/types.h>

#include <cstdint>

#include "nn/mumoe_gpt.h"

namespace mumoe::analysis {

/// An independent float64 copy of `gpt` on `device`, in eval mode (the analysed model is left
/// untouched; float64 makes the sparse and naive ablations agree token for token).
nn::MuMoEGpt copy_gpt(const nn::MuMoEGpt& gpt, torch::Dtype dtype, const torch::Device& device);

struct LayerPass {
  torch::Tensor mlp_input;     ///< h_L [B, T, C]
  torch::Tensor block_output;  ///< x_{L+1} = h_L + mlp(h_L) [B, T, C]
  torch::Tensor coefficients;  ///< [B, T, N] (expert mode 0; the GPT's blocks have one)
  torch::Tensor logits;        ///< [B, T, V]
};

/// The same operations as MuMoEGptImpl::forward (eval mode, no ablation), kept apart at block L.
LayerPass forward_at_layer(nn::MuMoEGpt& gpt, const torch::Tensor& idx, int64_t layer);

/// Blocks from..n_layer-1, ln_f and the tied lm_head applied to the residual stream x [B, T, C]
/// (from == n_layer: ln_f and lm_head only, which are per token, so x may also be [M, C]).
torch::Tensor forward_from_block(nn::MuMoEGpt& gpt, torch::Tensor x, int64_t from);

/// Per-token cross-entropy (nats) and argmax of logits [..., V] against targets [...] (long),
/// both flattened.
torch::Tensor token_losses(const torch::Tensor& logits, const torch::Tensor& targets);

/// Layer index of "transformer.h.{i}.mlp.MuMoE_layer" or "transformer.h.{i}.mlp" (a router
/// GPT's; a trailing '.' allowed) or of a plain number "2". Throws UsageError naming the GPT's layers for anything else or out of range.
int64_t gpt_layer_index(const std::string& name, int64_t n_layer);

}  // namespace mumoe::analysis
