// Applying logit edits live, in the forward pass (no retraining): y_o ← y_o + λ āᵀa.
#pragma once

#include <torch/types.h>

#include <vector>

#include "editing/logit_edit.h"
#include "nn/layer_config.h"

namespace mumoe::editing {

/// Throws UsageError when an edit does not fit the layer: output index beyond its outputs, or
/// ā not of length N (the first expert mode).
void check_edits(const nn::LayerConfig& config, const std::vector<LogitEdit>& edits);
/// The same for a layer of `experts` experts (first mode) and `outputs` outputs (any layer kind:
/// the edit needs only the coefficients, so it applies to router layers too).
void check_edits(int64_t experts, int64_t outputs, const std::vector<LogitEdit>& edits);

/// logits [B, O] plus every edit's λ (a · ā) on its output column; `coefficients` are the
/// first expert mode's [B, N]. Computed in the logits' dtype; the inputs are not modified.
torch::Tensor apply_edits(const torch::Tensor& logits, const torch::Tensor& coefficients,
                          const std::vector<LogitEdit>& edits);

/// The per-sample shift of one edit, λ (a · ā), as float64 [B].
torch::Tensor edit_shift(const torch::Tensor& coefficients, const LogitEdit& edit);

}  // namespace mumoe::editing
