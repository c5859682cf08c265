// One pass of the μMoE GPT that keeps what the analysis of MLP block L needs: the block's input
// h_L (the residual stream after attention), its output x_{L+1}, its expert coefficients and the
// logits. Token extraction (the cache, float32) and ablation (its baseline, float64) both call it.
#pragma once

#include <torch/types.h>

#include <cstdint>

#include "nn/mumoe_gpt.h"

namespace mumoe::analysis {

/// An independent copy of `gpt` in `dtype` on `device`, in eval mode (the analysed model is left
/// untouched; ablation copies to float64, which makes its sparse and naive methods agree token for
/// token).
nn::MuMoEGpt copy_gpt(const nn::MuMoEGpt& gpt, torch::Dtype dtype, const torch::Device& device);

/// `gpt` itself when it is already in eval mode, in `dtype`, on `device` (the passes only read it:
/// no copy of a GPT-2's half a gigabyte per extraction), otherwise copy_gpt.
nn::MuMoEGpt gpt_for_eval(const nn::MuMoEGpt& gpt, torch::Dtype dtype, const torch::Device& device);

struct LayerPass {
  torch::Tensor mlp_input;     ///< h_L [B, T, C]
  torch::Tensor block_output;  ///< x_{L+1} = h_L + mlp(h_L) [B, T, C]
  torch::Tensor coefficients;  ///< [B, T, N] (expert mode 0; the GPT's blocks have one)
  torch::Tensor logits;        ///< [B, T, V]; undefined when not asked for
  torch::Tensor final_stream;  ///< the residual stream after the last block [B, T, C]
};

/// The same operations as MuMoEGptImpl::forward (eval mode, no ablation), kept apart at block L.
/// Without `with_logits`, the pass stops before ln_f and lm_head (next_token_outcomes reads
/// final_stream instead).
LayerPass forward_at_layer(nn::MuMoEGpt& gpt, const torch::Tensor& idx, int64_t layer, bool with_logits = true);

/// Per-token cross-entropy (nats, [B·T]) and argmax ([B·T], long) of the next-token logits of
/// the residual stream after the last block, `stream` [B, T, C], against `targets` [B, T]: the
/// values token_losses and argmax give on the whole logits, computed a few hundred tokens at a
/// time. Why: GPT-2's logits are 206 MB a 1,024-token sequence, and a block that large is mapped
/// afresh by every allocation (io/allocator_tuning.h: page faults at ~13 µs a page); pieces under
/// 48 MB are served again from the heap.
struct TokenOutcomes {
  torch::Tensor losses;
  torch::Tensor predictions;
};
inline constexpr int64_t kOutcomePieceBytes = int64_t{48} << 20;
TokenOutcomes next_token_outcomes(nn::MuMoEGpt& gpt, const torch::Tensor& stream, const torch::Tensor& targets,
                                  int64_t piece_bytes = kOutcomePieceBytes);

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
