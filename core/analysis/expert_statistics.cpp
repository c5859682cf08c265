#include "analysis/expert_statistics.h"

#include <algorithm>
#include <cmath>

#include "io/errors.h"

namespace mumoe::analysis {

double entropy_bits(const std::vector<double>& weights) {
  double total = 0;
  for (double w : weights) total += w;
  if (total <= 0) return 0;
  double h = 0;
  for (double w : weights)
    if (w > 0) h -= (w / total) * std::log2(w / total);
  return h;
}

ModeStatistics expert_statistics(const RunData& run, int64_t mode, int64_t class_count, double threshold) {
  if (mode < 0 || mode >= run.modes())
    throw UsageError("expert mode " + std::to_string(mode) + " does not exist (the layer has " +
                     std::to_string(run.modes()) + ")");
  // Labels index the expert × class table: one outside it would write out of bounds (a
  // multi-label run's bitmasks are read bit by bit below 62).
  if (!run.multilabel) {
    if (auto problem = class_index_problem(run.labels, {}, class_count); !problem.empty())
      throw UsageError("expert statistics: " + problem);
  }
  if (run.multilabel && class_count > kMaxMultilabelOutputs)
    throw UsageError("expert statistics: more outputs than a multi-label run holds");
  // The classes sample s counts for: its label, or every output whose truth is positive.
  const auto for_each_class = [&](int64_t s, auto&& count) {
    if (!run.multilabel) return count(run.labels[s]);
    for (int64_t o = 0; o < class_count; ++o)
      if ((run.labels[s] >> o) & 1) count(o);
  };
  const auto& rows = run.coefficients[mode];
  const auto& cols = run.columns[mode];
  const int64_t experts = run.info.expert_dims[mode];
  const int64_t samples = run.samples();

  ModeStatistics st;
  st.mode = mode;
  st.multilabel = run.multilabel;
  st.threshold = threshold;
  st.samples = samples;
  st.expert_class_counts.assign(experts, std::vector<int64_t>(class_count, 0));

  std::vector<double> mean_a(experts, 0.0);
  std::vector<int64_t> argmax_count(experts, 0);
  double entropy_sum = 0;
  for (int64_t s = 0; s < samples; ++s) {
    std::vector<double> a;
    int64_t best = -1;
    double best_value = -1;
    for (int64_t k = rows.offsets[s]; k < rows.offsets[s + 1]; ++k) {
      const double v = rows.values[k];
      a.push_back(v);
      mean_a[rows.indices[k]] += v;
      if (v > best_value) {  // indices increase within a row, so ties go to the lowest expert
        best_value = v;
        best = rows.indices[k];
      }
    }
    entropy_sum += entropy_bits(a);
    if (best >= 0) {
      ++argmax_count[best];
      for_each_class(s, [&](int64_t c) { ++st.expert_class_counts[best][c]; });
    }
  }
  st.mean_active_experts = samples ? static_cast<double>(rows.indices.size()) / samples : 0;
  st.gate_entropy_bits = samples ? entropy_sum / samples : 0;
  for (auto& m : mean_a) m = samples ? m / samples : 0;
  st.utilisation_entropy_bits = entropy_bits(mean_a);

  if (run.multilabel) {
    // Per output, the argmax expert against the binary truth: E × {0, 1}.
    std::vector<double> expert_mass(argmax_count.begin(), argmax_count.end());
    st.expert_entropy_bits = entropy_bits(expert_mass);
    double class_entropy = 0, information = 0;
    for (int64_t o = 0; o < class_count; ++o) {
      std::vector<double> truth(2, 0), joint;
      for (int64_t n = 0; n < experts; ++n) {
        const auto positive = static_cast<double>(st.expert_class_counts[n][o]);
        const auto negative = static_cast<double>(argmax_count[n]) - positive;
        truth[0] += negative;
        truth[1] += positive;
        joint.push_back(negative);
        joint.push_back(positive);
      }
      const double h = entropy_bits(truth);
      class_entropy += h;
      information += st.expert_entropy_bits + h - entropy_bits(joint);
    }
    st.class_entropy_bits = class_count ? class_entropy / class_count : 0;
    st.mutual_information_bits = class_count ? information / class_count : 0;
  }
  std::vector<double> expert_mass(experts, 0), class_mass(class_count, 0), joint;
  for (int64_t n = 0; n < experts; ++n)
    for (int64_t c = 0; c < class_count; ++c) {
      const double v = static_cast<double>(st.expert_class_counts[n][c]);
      expert_mass[n] += v;
      class_mass[c] += v;
      joint.push_back(v);
    }
  if (!run.multilabel) {
    st.expert_entropy_bits = entropy_bits(expert_mass);
    st.class_entropy_bits = entropy_bits(class_mass);
    st.mutual_information_bits = st.expert_entropy_bits + st.class_entropy_bits - entropy_bits(joint);
  }

  for (int64_t n = 0; n < experts; ++n) {
    ExpertSummary e;
    e.expert = n;
    e.support = cols.support(n);
    e.argmax_count = argmax_count[n];
    e.mean_coefficient = mean_a[n];
    std::vector<int64_t> per_class(class_count, 0);
    for (int64_t k = cols.offsets[n]; k < cols.offsets[n + 1]; ++k)
      if (cols.values[k] >= threshold) {
        ++e.load;
        for_each_class(cols.samples[k], [&](int64_t c) { ++per_class[c]; });
      }
    e.dead = e.load == 0;
    for (int64_t c = 0; c < class_count; ++c)
      if (per_class[c] > 0) e.top_classes.emplace_back(c, per_class[c]);
    std::stable_sort(e.top_classes.begin(), e.top_classes.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    if (e.top_classes.size() > 3) e.top_classes.resize(3);
    st.dead_experts += e.dead;
    st.experts.push_back(std::move(e));
  }
  return st;
}

}  // namespace mumoe::analysis
