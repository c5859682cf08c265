#include "analysis/ablation_metrics.h"

#include <algorithm>
#include <cmath>

#include <limits>
#include <string>

#include "analysis/ablation_results.h"
#include "io/errors.h"

namespace mumoe::analysis {
namespace {

// Both accuracies count one label per prediction; `who` names the caller in the error.
void check_same_count(const char* who, const std::vector<int64_t>& labels, const std::vector<int64_t>& predictions) {
  if (labels.size() != predictions.size())
    throw UsageError(std::string(who) + ": " + std::to_string(labels.size()) + " labels but " +
                     std::to_string(predictions.size()) + " predictions");
}

}  // namespace

ClassAccuracy class_accuracy(const std::vector<int64_t>& labels, const std::vector<int64_t>& predictions,
                             int64_t class_count) {
  check_same_count("class_accuracy", labels, predictions);
  ClassAccuracy a;
  a.correct.assign(class_count, 0);
  a.count.assign(class_count, 0);
  int64_t correct = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    const auto y = labels[i];
    if (y < 0 || y >= class_count)
      throw UsageError("class_accuracy: label " + std::to_string(y) + " outside 0–" + std::to_string(class_count - 1));
    ++a.count[y];
    if (predictions[i] == y) {
      ++a.correct[y];
      ++correct;
    }
  }
  for (int64_t c = 0; c < class_count; ++c)
    a.per_class.push_back(a.count[c] ? static_cast<double>(a.correct[c]) / a.count[c] : 0.0);
  a.overall = labels.empty() ? 0.0 : static_cast<double>(correct) / labels.size();
  return a;
}

ClassAccuracy output_accuracy(const std::vector<int64_t>& labels, const std::vector<int64_t>& predictions,
                              int64_t outputs) {
  check_same_count("output_accuracy", labels, predictions);
  ClassAccuracy a;
  a.correct.assign(outputs, 0);
  a.count.assign(outputs, static_cast<int64_t>(labels.size()));
  int64_t correct = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    const auto wrong = labels[i] ^ predictions[i];
    for (int64_t o = 0; o < outputs; ++o)
      if (!((wrong >> o) & 1)) {
        ++a.correct[o];
        ++correct;
      }
  }
  for (int64_t o = 0; o < outputs; ++o)
    a.per_class.push_back(labels.empty() ? 0.0 : static_cast<double>(a.correct[o]) / labels.size());
  a.overall = labels.empty() || outputs == 0 ? 0.0 : static_cast<double>(correct) / (labels.size() * outputs);
  return a;
}

ClassAccuracy accuracy_of(const std::vector<int64_t>& labels, const std::vector<int64_t>& predictions,
                          int64_t class_count, bool multilabel) {
  return multilabel ? output_accuracy(labels, predictions, class_count)
                    : class_accuracy(labels, predictions, class_count);
}

std::vector<double> accuracy_drop(const ClassAccuracy& before, const ClassAccuracy& after) {
  std::vector<double> d(before.per_class.size(), 0.0);
  for (size_t c = 0; c < d.size(); ++c)
    if (before.per_class[c] > 0) d[c] = (before.per_class[c] - after.per_class[c]) / before.per_class[c];
  return d;
}

double polysemanticity(const std::vector<double>& drop) {
  if (drop.empty()) return 0;
  const auto top = std::max_element(drop.begin(), drop.end()) - drop.begin();
  double sum = 0;
  for (size_t c = 0; c < drop.size(); ++c) {
    const double diff = drop[c] - (static_cast<int64_t>(c) == top ? 1.0 : 0.0);
    sum += diff * diff;
  }
  return std::sqrt(sum);
}

bool has_effect(const std::vector<double>& drop) {
  return std::any_of(drop.begin(), drop.end(), [](double v) { return v != 0; });
}

void require_distinct_experts(const std::vector<int64_t>& experts) {
  auto sorted = experts;
  std::sort(sorted.begin(), sorted.end());
  const auto repeated = std::adjacent_find(sorted.begin(), sorted.end());
  if (repeated != sorted.end())
    throw UsageError("expert " + std::to_string(*repeated) + " is listed twice: name each expert to remove once");
}

void summarise_sweep(SweepOutcome& sweep) {
  double sum = 0;
  sweep.experts_with_effect = 0;
  for (const auto& o : sweep.experts)
    if (o.has_effect) {
      sum += o.polysemanticity;
      ++sweep.experts_with_effect;
    }
  sweep.mean_polysemanticity =
      sweep.experts_with_effect ? sum / sweep.experts_with_effect : std::numeric_limits<double>::quiet_NaN();
}

ExpertRange ExpertRange::within(int64_t experts) const {
  const ExpertRange r{begin, end < 0 ? experts : end};
  if (r.begin < 0 || r.begin >= r.end || r.end > experts)
    throw UsageError("experts " + std::to_string(r.begin) + "–" + std::to_string(r.end - 1) + " are not a range of the " +
                     std::to_string(experts) + " experts");
  return r;
}

}  // namespace mumoe::analysis
