// Text and JSON rendering of fairness reports, shared by `mumoe fairness` and `mumoe rewrite`.
#pragma once

#include <nlohmann/json.hpp>

#include <ostream>
#include <string>
#include <vector>

#include "editing/bias_study.h"
#include "editing/fairness_metrics.h"

namespace mumoe::cli {

/// One model variant's results: its fairness report and the accuracy of every output.
struct VariantResult {
  std::string name;  ///< "model", "blind threshold", "oversample", "expert rewrite"
  editing::FairnessReport report;
  std::vector<double> per_target_accuracy;
  double test_accuracy() const;  ///< mean over outputs (the multi-label test accuracy)
};

VariantResult evaluate_variant(const editing::BiasStudy& study, const editing::BiasTask& task, std::string name,
                               const torch::Tensor& test_logits);

/// report JSON + "test_accuracy" + "per_target_accuracy" (+ "mrs" relative to `baseline`).
nlohmann::json to_json(const VariantResult& v, const VariantResult* baseline = nullptr);

/// The 4-cell table and the metrics, one column per variant (the first is the baseline; later
/// columns also show MRS).
void print_variants(std::ostream& out, const editing::BiasTask& task, const std::vector<VariantResult>& variants);

}  // namespace mumoe::cli
