// Fairness metrics of one binary target head over the four subpopulations target × sensitive
// (spec §5; the paper's Table 2). Plain C++ over 0/1 vectors, so the GUI and tests can use it
// without LibTorch.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mumoe::editing {

struct SubgroupCell {
  int64_t count = 0;
  int64_t correct = 0;
  double accuracy() const { return count ? static_cast<double>(correct) / count : 0.0; }
};

struct FairnessReport {
  /// cells[t][s]: samples whose target attribute is t and sensitive attribute is s.
  SubgroupCell cells[2][2];
  int target_value = 1;     ///< the cell of the target subpopulation …
  int sensitive_value = 1;  ///< … (target_value, sensitive_value)
  int64_t samples = 0;
  double target_accuracy = 0;               ///< accuracy of this head over all samples
  double target_subpopulation_accuracy = 0;  ///< accuracy inside the target cell
  /// |TPR(s=0) − TPR(s=1)| for the positive target label; TPR(s) = accuracy of cell [1][s].
  double equality_of_opportunity = 0;
  /// Population standard deviation (divide by 4) of the four cell accuracies.
  double std_bias = 0;
  /// The lowest of the four cell accuracies (the paper's "Max-Min": maximise the minimum).
  double max_min = 0;

  double cell_accuracy(int t, int s) const { return cells[t][s].accuracy(); }
};

/// Counts and metrics from per-sample predictions, truths and sensitive values (each 0/1, the
/// same length). Throws UsageError on a length mismatch or a value other than 0/1.
FairnessReport fairness_report(const std::vector<uint8_t>& predicted, const std::vector<uint8_t>& truth,
                               const std::vector<uint8_t>& sensitive, int target_value, int sensitive_value);

/// The non-empty cell {t, s} with the lowest accuracy — the most under-served subpopulation.
/// Ties keep the first of [1][1], [1][0], [0][1], [0][0]; nullopt when every cell is empty.
std::optional<std::pair<int, int>> worst_cell(const FairnessReport& report);

/// MRS = (â_t − a_t) − Σ_{i≠t} |â_i − a_i| over the four cells: the gain on the target cell
/// minus the damage to the other three (best possible 1 − a_t). Both reports must name the
/// same target cell.
double mrs(const FairnessReport& before, const FairnessReport& after);

/// {"cells": [{"target", "sensitive", "count", "correct", "accuracy"} ×4], "target_cell",
///  "target_accuracy", "target_subpopulation_accuracy", "equality_of_opportunity", "std_bias",
///  "max_min", "samples"}.
nlohmann::json to_json(const FairnessReport& report);

}  // namespace mumoe::editing
