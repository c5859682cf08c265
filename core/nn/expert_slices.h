// The parameters that remove experts "literally" — W_n := 0 — when zeroed: what the naive ablation
// oracles of the ViT block analysis (vit_block_analysis.h) and the GPT's (lm_ablation.h) zero for
// a pass, and what an export without experts (editing/model_export.h) zeroes for good, so that
// all of them remove the same thing from the same kind of layer.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "nn/moe_layer.h"
#include "nn/mumoe_block.h"

namespace mumoe::nn {

/// Views of expert n's slices of both layers of a μMoE block, for every n in `experts` (CP: row n
/// of factors.0; TR: slice [:, n, :]).
std::vector<torch::Tensor> expert_slices(const MuMoEBlock& block, const std::vector<int64_t>& experts);

/// Views of a router layer's expert n's output layer, weights and bias (experts_w2/b2; a linear
/// expert's experts_w1/b1): zeroed, the expert outputs 0 on every slot — its output removed by its
/// parameters, where the sparse methods set its combine weights to 0.
std::vector<torch::Tensor> expert_slices(const MoELayer& layer, const std::vector<int64_t>& experts);

}  // namespace mumoe::analysis
