// One metrics type for every variant of a multi-label model that the bias workflow measures on
// the test split — the model as opened, the model with a session's edits, with one more edit, or
// a baseline — and the one comparison both front ends show (`mumoe rewrite`, the GUI's Bias
// page). Every relative figure names its reference: MRS is always measured against a variant
// that the result carries by name, never against an implied "unedited model".
//
// Plain C++ + JSON (no LibTorch): the GUI includes it. The functions that compute these from a
// BiasStudy are in bias_study.h.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "editing/bias_task.h"
#include "editing/fairness_metrics.h"
#include "editing/logit_edit.h"

namespace mumoe::editing {

struct VariantMetrics {
  /// "model", "model + 2 edits", "expert rewrite", "blind threshold", "oversample" …
  std::string name;
  FairnessReport report;                    ///< the task's four cells and fairness metrics
  std::vector<double> per_target_accuracy;  ///< one per output
  double test_accuracy = 0;                 ///< their mean (the multi-label test accuracy)
  /// MRS (fairness_metrics.h) against the variant named `mrs_reference`; unset for a variant
  /// that is itself the reference (or was measured alone).
  std::optional<double> mrs;
  std::string mrs_reference;
};

/// Sets `variant.mrs` and `variant.mrs_reference` against `reference` (same task cell).
void measure_mrs_against(VariantMetrics& variant, const VariantMetrics& reference);

/// The name of the model with `edits` applied edits: "model", "model + 1 edit", "model + 3 edits".
std::string edited_model_name(size_t edits);

/// What a rewrite changes: the model with the edits applied before it ("before"), the same plus
/// the new edit ("after", MRS against before), and any baselines asked for (MRS against before).
struct RewriteComparison {
  LogitEdit edit;
  double proposed_lambda = 0;  ///< the signed N the task proposes (whatever λ `edit` uses)
  VariantMetrics before;
  VariantMetrics after;
  std::vector<VariantMetrics> baselines;
};

/// The comparison as a table, as `mumoe rewrite` prints it and `mumoe report` draws it: the four
/// cells of task.target × task.sensitive ([1][1], [1][0], [0][1], [0][0], each with its size),
/// the fairness metrics, the target's and the whole test accuracy, and MRS when some variant has
/// one. One value per variant in each row (nullopt: not measured, e.g. the reference's own MRS).
struct VariantTable {
  struct Row {
    std::string label;
    bool cell = false;         ///< one of the four cells (the rest are metrics)
    bool target_cell = false;  ///< the task's target subpopulation
    bool fraction = true;      ///< shown as a percentage; false for MRS (a plain number)
    std::vector<std::optional<double>> values;
  };
  std::vector<std::string> variants;  ///< column heads, the variants' names
  std::vector<Row> rows;
  std::string mrs_reference;  ///< what every MRS is measured against ("" = no MRS row)
};
/// Throws UsageError when `variants` is empty.
VariantTable variant_table(const BiasTask& task, const std::vector<VariantMetrics>& variants);

/// to_json(report) + "name", "test_accuracy", "per_target_accuracy", and "mrs" with
/// "mrs_reference" when MRS is set.
nlohmann::json to_json(const VariantMetrics& variant);

}  // namespace mumoe::editing
