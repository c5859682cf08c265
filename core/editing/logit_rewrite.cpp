#include "editing/logit_rewrite.h"

#include <torch/torch.h>

#include "io/errors.h"

namespace mumoe::editing {

void check_edits(const nn::LayerConfig& config, const std::vector<LogitEdit>& edits) {
  check_edits(config.expert_dims.at(0), config.final_output_dim(), edits);
}

void check_edits(int64_t experts, int64_t outputs, const std::vector<LogitEdit>& edits) {
  for (const auto& e : edits) {
    if (e.output < 0 || e.output >= outputs)
      throw UsageError("edit of '" + e.target + "' targets output " + std::to_string(e.output) + " but the layer has " +
                       std::to_string(outputs) + " outputs");
    if (static_cast<int64_t>(e.mean_coefficients.size()) != experts)
      throw UsageError("edit of '" + e.target + "' has " + std::to_string(e.mean_coefficients.size()) +
                       " mean coefficients but the layer has " + std::to_string(experts) + " experts");
  }
}

torch::Tensor edit_shift(const torch::Tensor& coefficients, const LogitEdit& edit) {
  const auto mean = torch::tensor(edit.mean_coefficients, torch::kFloat64).to(coefficients.device());
  return coefficients.to(torch::kFloat64).matmul(mean) * edit.lambda;
}

torch::Tensor apply_edits(const torch::Tensor& logits, const torch::Tensor& coefficients,
                          const std::vector<LogitEdit>& edits) {
  auto out = logits.clone();
  for (const auto& e : edits) {
    if (e.output < 0 || e.output >= logits.size(1))
      throw UsageError("edit of '" + e.target + "' targets output " + std::to_string(e.output) + " of " +
                       std::to_string(logits.size(1)));
    if (static_cast<int64_t>(e.mean_coefficients.size()) != coefficients.size(1))
      throw UsageError("edit of '" + e.target + "' has " + std::to_string(e.mean_coefficients.size()) +
                       " mean coefficients for " + std::to_string(coefficients.size(1)) + " experts");
    out.select(1, e.output).add_(edit_shift(coefficients, e).to(out.scalar_type()));
  }
  return out;
}

}  // namespace mumoe::editing
