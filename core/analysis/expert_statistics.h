// What each expert of one expert mode does over a data set (spec §4): load, dead experts, top
// classes, gate sparsity H_s, utilisation H_u, and the expert × class table with I(E;Y).
// Plain C++ over RunData.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "analysis/run_data.h"

namespace mumoe::analysis {

struct ExpertSummary {
  int64_t expert = 0;
  int64_t load = 0;              ///< samples with a_n ≥ threshold
  int64_t support = 0;           ///< samples with a_n > 0 (those an ablation can change)
  int64_t argmax_count = 0;      ///< samples whose largest coefficient is a_n
  double mean_coefficient = 0;   ///< mean of a_n over all samples
  bool dead = false;             ///< load == 0
  /// (class, samples) among the load samples, most frequent first, at most 3.
  std::vector<std::pair<int64_t, int64_t>> top_classes;
};

struct ModeStatistics {
  int64_t mode = 0;
  /// A multi-label model's run (RunData::multilabel): "classes" are its outputs — top_classes
  /// and expert_class_counts count samples whose output is positive (truth), and the entropies
  /// are means over the outputs of the binary H(Y_o) and I(E;Y_o).
  bool multilabel = false;
  double threshold = 0.5;
  int64_t samples = 0;
  std::vector<ExpertSummary> experts;
  int64_t dead_experts = 0;
  double mean_active_experts = 0;   ///< mean number of a_n > 0 per sample (entmax sparsity)
  double gate_entropy_bits = 0;     ///< H_s = mean_s H(a_s)
  double utilisation_entropy_bits = 0;  ///< H_u = H(mean_s a_s)
  /// Expert = argmax a: counts[n][c] of samples with label c routed mainly to expert n.
  std::vector<std::vector<int64_t>> expert_class_counts;
  double expert_entropy_bits = 0;   ///< H(E)
  double class_entropy_bits = 0;    ///< H(Y)
  double mutual_information_bits = 0;  ///< I(E;Y) = H(E) + H(Y) − H(E,Y)
};

/// Statistics of expert mode `mode` of `run` for `class_count` classes (outputs of a multi-label
/// run). Throws UsageError for
/// a mode that does not exist or a label outside [0, class_count).
ModeStatistics expert_statistics(const RunData& run, int64_t mode, int64_t class_count, double threshold = 0.5);

/// Shannon entropy in bits of a distribution given by non-negative weights (normalised here);
/// zero weights contribute nothing.
double entropy_bits(const std::vector<double>& weights);

}  // namespace mumoe::analysis
