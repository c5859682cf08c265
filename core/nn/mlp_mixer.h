// The μMoE reference code's MLP-Mixer (github james-oldfield/muMoE, experiments/mlp_mixer.py,
// itself after lucidrains/mlp-mixer-pytorch) as a backbone, with parameter names equal to that
// script's state-dict keys, so a checkpoint it saved loads key for key:
//
//   stem.1                     Linear on each P×P×C patch (stem.0 is einops' Rearrange
//                              'b c (h p1) (w p2) -> b (h w) (p1 p2 c)': features ordered p1, p2, c)
//   mixer_blocks.{i}.0.norm    LayerNorm [C];  mixer_blocks.{i}.0.fn.1: token mixing on the
//                              transposed stream [B, C, T] (fn.0 and fn.2 are the Rearranges)
//   mixer_blocks.{i}.1.norm    LayerNorm [C];  mixer_blocks.{i}.1.fn: channel mixing on [B, T, C]
//   head.0                     LayerNorm [C], then the mean over tokens (head.1); head.2, the
//                              Linear classifier, belongs to the image classifier.
//
// Each mixing MLP is the reference's two-layer μMoE block (nn::MuMoEBlock: projs.0, bn.0,
// MuMoE.factors.*, MuMoE2.factors.*) or its `--layer MLP` baseline Linear(0)–GELU–Dropout–
// Linear(3)–Dropout. Eval mode only differs from training by the BatchNorm gates' statistics.
//
// As a TokenBackbone (nn/vision_backbones.h) a Mixer of depth D has 2·D steps: step 2i is block
// i's token mixing, step 2i + 1 its channel mixing; each step is "mlp_residual" alone (the
// attention half is the identity). A token-mixing μMoE's coefficient rows are the C channels of an
// image ([B, C, N]), not its patches: mlp_rows_are_tokens() tells them apart.
#pragma once

#include <memory>

#include "nn/vision_backbones.h"

namespace mumoe::nn {

/// The Mixer of `config` (kind MlpMixer, validated), randomly initialised.
std::shared_ptr<BackboneImpl> make_mlp_mixer(const BackboneConfig& config);

}  // namespace mumoe::nn
