// The accuracy bookkeeping of counterfactual ablation (spec §4, paper §4.1.2 Eq. 4), as plain
// functions of labels and predictions so they can be checked against hand-computed examples.
#pragma once

#include <cstdint>
#include <vector>

namespace mumoe::analysis {

struct ClassAccuracy {
  std::vector<double> per_class;    ///< correct / count per class (0 for a class with no samples)
  std::vector<int64_t> correct;     ///< per class
  std::vector<int64_t> count;       ///< per class
  double overall = 0;               ///< Σ correct / Σ count
};

/// Accuracy per class over `class_count` classes. Labels must lie in [0, class_count).
ClassAccuracy class_accuracy(const std::vector<int64_t>& labels, const std::vector<int64_t>& predictions,
                             int64_t class_count);

/// Accuracy per output of a multi-label model whose labels and predictions are output bitmasks
/// (RunData::multilabel): output o is correct on sample s when bit o of both agrees; every output
/// counts every sample, and `overall` is the mean of the outputs' accuracies (the multi-label test
/// accuracy).
ClassAccuracy output_accuracy(const std::vector<int64_t>& labels, const std::vector<int64_t>& predictions,
                              int64_t outputs);

/// class_accuracy, or output_accuracy when `multilabel`.
ClassAccuracy accuracy_of(const std::vector<int64_t>& labels, const std::vector<int64_t>& predictions,
                          int64_t class_count, bool multilabel);

/// d_c = (y_c − ŷ_c) / y_c: the normalised loss of class-c accuracy when an expert is removed.
/// A class with y_c = 0 has nothing to lose and gets d_c = 0 (the paper leaves 0/0 undefined).
std::vector<double> accuracy_drop(const ClassAccuracy& before, const ClassAccuracy& after);

/// p = ‖d − onehot(argmax d)‖₂ (Eq. 4); argmax takes the first maximum. 0 for a perfectly
/// monosemantic expert (all of one class's accuracy lost, nothing else changed).
double polysemanticity(const std::vector<double>& drop);

/// Throws UsageError naming an expert that `experts` lists twice. The naive oracle zeroes and
/// restores one slice per listed expert, so a repeated one would be restored from its own zeroed
/// copy (staying removed for every later answer), and a rank-one correction would remove it twice.
void require_distinct_experts(const std::vector<int64_t>& experts);

/// True if removing the expert changed any class accuracy (the experts Eq. 4 is averaged over).
bool has_effect(const std::vector<double>& drop);

}  // namespace mumoe::analysis
