#include "editing/fairness_metrics.h"

#include <algorithm>
#include <cmath>

#include "io/errors.h"

namespace mumoe::editing {

FairnessReport fairness_report(const std::vector<uint8_t>& predicted, const std::vector<uint8_t>& truth,
                               const std::vector<uint8_t>& sensitive, int target_value, int sensitive_value) {
  if (predicted.size() != truth.size() || truth.size() != sensitive.size())
    throw UsageError("fairness metrics: predictions (" + std::to_string(predicted.size()) + "), truths (" +
                     std::to_string(truth.size()) + ") and sensitive values (" + std::to_string(sensitive.size()) +
                     ") differ in length");
  if ((target_value != 0 && target_value != 1) || (sensitive_value != 0 && sensitive_value != 1))
    throw UsageError("fairness metrics: the target cell must be given by 0/1 values");
  FairnessReport r;
  r.target_value = target_value;
  r.sensitive_value = sensitive_value;
  r.samples = static_cast<int64_t>(truth.size());
  int64_t correct = 0;
  for (size_t i = 0; i < truth.size(); ++i) {
    if (predicted[i] > 1 || truth[i] > 1 || sensitive[i] > 1)
      throw UsageError("fairness metrics: sample " + std::to_string(i) + " has a value other than 0/1");
    auto& cell = r.cells[truth[i]][sensitive[i]];
    ++cell.count;
    const bool hit = predicted[i] == truth[i];
    cell.correct += hit;
    correct += hit;
  }
  r.target_accuracy = r.samples ? static_cast<double>(correct) / r.samples : 0.0;
  r.target_subpopulation_accuracy = r.cell_accuracy(target_value, sensitive_value);
  r.equality_of_opportunity = std::fabs(r.cell_accuracy(1, 0) - r.cell_accuracy(1, 1));
  double mean = 0, lowest = 1;
  for (int t = 0; t < 2; ++t)
    for (int s = 0; s < 2; ++s) {
      mean += r.cell_accuracy(t, s) / 4;
      lowest = std::min(lowest, r.cell_accuracy(t, s));
    }
  double variance = 0;
  for (int t = 0; t < 2; ++t)
    for (int s = 0; s < 2; ++s) variance += (r.cell_accuracy(t, s) - mean) * (r.cell_accuracy(t, s) - mean) / 4;
  r.std_bias = std::sqrt(variance);
  r.max_min = lowest;
  return r;
}

double mrs(const FairnessReport& before, const FairnessReport& after) {
  if (before.target_value != after.target_value || before.sensitive_value != after.sensitive_value)
    throw UsageError("MRS: the two reports name different target subpopulations");
  double damage = 0, gain = 0;
  for (int t = 0; t < 2; ++t)
    for (int s = 0; s < 2; ++s) {
      const double change = after.cell_accuracy(t, s) - before.cell_accuracy(t, s);
      if (t == before.target_value && s == before.sensitive_value) gain = change;
      else damage += std::fabs(change);
    }
  return gain - damage;
}

nlohmann::json to_json(const FairnessReport& r) {
  nlohmann::json cells = nlohmann::json::array();
  for (int t = 0; t < 2; ++t)
    for (int s = 0; s < 2; ++s)
      cells.push_back({{"target", t},
                       {"sensitive", s},
                       {"count", r.cells[t][s].count},
                       {"correct", r.cells[t][s].correct},
                       {"accuracy", r.cell_accuracy(t, s)}});
  return {{"cells", cells},
          {"target_cell", {{"target", r.target_value}, {"sensitive", r.sensitive_value}}},
          {"samples", r.samples},
          {"target_accuracy", r.target_accuracy},
          {"target_subpopulation_accuracy", r.target_subpopulation_accuracy},
          {"equality_of_opportunity", r.equality_of_opportunity},
          {"std_bias", r.std_bias},
          {"max_min", r.max_min}};
}

std::optional<std::pair<int, int>> worst_cell(const FairnessReport& r) {
  std::optional<std::pair<int, int>> worst;
  for (int t : {1, 0})
    for (int s : {1, 0})
      if (r.cells[t][s].count > 0 && (!worst || r.cell_accuracy(t, s) < r.cell_accuracy(worst->first, worst->second)))
        worst = std::make_pair(t, s);
  return worst;
}

}  // namespace mumoe::editing
