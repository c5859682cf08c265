// What `mumoe predict` writes, for checking the app against one's own PyTorch: an image
// classifier's (or a bare layer's) outputs on data and, when asked, the coefficients of every
// expert layer it has — the head's, and each μMoE or router layer inside a ViT or MLP-Mixer
// backbone — computed by the model's plain forward, step by step through the backbone
// (nn::TokenBackbone), in float32 as PyTorch would; and a GPT's next-token logits on the
// windows every text analysis reads (analysis/lm_eval_set.h), with each MLP block's coefficients.
// Nothing is cached.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "analysis/ablation_results.h"
#include "nn/mumoe_gpt.h"

namespace mumoe::data {
struct Dataset;
}
namespace mumoe::model {
class ClassifierModel;
}

namespace mumoe::analysis {

struct LmEvalSet;

struct Predictions {
  /// [S, classes] float32 (a multi-label model: one logit per label); a GPT's [S, T, V] for its
  /// S windows of T tokens.
  torch::Tensor logits;
  /// A GPT's input token ids [S, T] (int64): window s is the stream's tokens [s·T, s·T + T);
  /// undefined for other models.
  torch::Tensor tokens;
  /// (name, coefficients) in forward order, float32 on the CPU: the layer's name for its first
  /// expert mode ("blocks.1.mlp", "mixer_blocks.1.0.fn.1", "head"), "NAME.mode{e}" for the others;
  /// [S, N] for a head or bare layer, [S, rows, N] inside a backbone (rows: tokens, or a Mixer
  /// token-mixing layer's channels), [S, T, N] for a GPT's MLP block
  /// ("transformer.h.{i}.mlp.MuMoE_layer"; plain MLPs have none).
  std::vector<std::pair<std::string, torch::Tensor>> coefficients;
};

/// The model's outputs for data samples [0, limit) (0 = all), `batch` at a time on `device`;
/// `with_coefficients` adds every expert layer's. `progress` (samples done, total) may cancel
/// (Cancelled). Throws UsageError when the data does not fit the model.
Predictions predict(model::ClassifierModel& model, const data::Dataset& data, int64_t limit, int64_t batch,
                    bool with_coefficients, const std::string& device, const SweepCallback& progress = {});

/// A GPT's logits on the windows of `set` (all of them: cut the set with its max_sequences),
/// `batch` windows at a time on `device`, with every μMoE or router MLP block's coefficients
/// when asked. `progress` (windows done, total) may cancel (Cancelled). Throws UsageError when
/// the set's windows are not the GPT's context length or hold ids beyond its vocabulary.
Predictions predict_lm(nn::MuMoEGpt& gpt, const LmEvalSet& set, int64_t batch, bool with_coefficients,
                       const std::string& device, const SweepCallback& progress = {});

}  // namespace mumoe::analysis
