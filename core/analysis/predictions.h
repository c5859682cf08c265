// What `mumoe predict` writes, for checking the app against one's own PyTorch: an image
// classifier's (or a bare layer's) outputs on data and, when asked, the coefficients of every
// expert layer it has — the head's, and each μMoE or router layer inside a ViT or MLP-Mixer
// backbone — computed by the model's plain forward, step by step through the backbone
// (nn::TokenBackbone), in float32 as PyTorch would. Nothing is cached.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "analysis/ablation_results.h"

namespace mumoe::data {
struct Dataset;
}
namespace mumoe::model {
class ClassifierModel;
}

namespace mumoe::analysis {

struct Predictions {
  torch::Tensor logits;  ///< [S, classes] float32 (a multi-label model: one logit per label)
  /// (name, coefficients) in forward order, float32 on the CPU: the layer's name for its first
  /// expert mode ("blocks.1.mlp", "mixer_blocks.1.0.fn.1", "head"), "NAME.mode{e}" for the others;
  /// [S, N] for a head or bare layer, [S, rows, N] inside a backbone (rows: tokens, or a Mixer
  /// token-mixing layer's channels).
  std::vector<std::pair<std::string, torch::Tensor>> coefficients;
};

/// The model's outputs for data samples [0, limit) (0 = all), `batch` at a time on `device`;
/// `with_coefficients` adds every expert layer's. `progress` (samples done, total) may cancel
/// (Cancelled). Throws UsageError when the data does not fit the model.
Predictions predict(model::ClassifierModel& model, const data::Dataset& data, int64_t limit, int64_t batch,
                    bool with_coefficients, const std::string& device, const SweepCallback& progress = {});

}  // namespace mumoe::analysis
