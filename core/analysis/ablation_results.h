// What counterfactual ablation reports (torch-free, so GUI code can include it). The engine is
// counterfactual_ablation.h.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "analysis/ablation_metrics.h"

namespace mumoe::analysis {

enum class AblationMethod { Sparse, Naive };
std::string to_string(AblationMethod method);
AblationMethod parse_ablation_method(const std::string& text);  ///< "sparse" | "naive"

struct AblationOutcome {
  int64_t mode = 0;
  std::vector<int64_t> experts;
  ClassAccuracy after;
  std::vector<double> drop;  ///< d_c per class
  double polysemanticity = 0;
  bool has_effect = false;
  int64_t affected_samples = 0;     ///< samples with a_n > 0 for some ablated n
  int64_t changed_predictions = 0;  ///< samples whose prediction changed
};

struct SweepOutcome {
  int64_t mode = 0;
  AblationMethod method = AblationMethod::Sparse;
  /// One per expert of the mode, in order (a sweep shard's: one per expert of its range).
  std::vector<AblationOutcome> experts;
  /// Mean p^(n) over experts whose removal changed some class accuracy (NaN if none did).
  double mean_polysemanticity = 0;
  int64_t experts_with_effect = 0;
  double seconds = 0;
};

/// Reports experts done; return false to cancel (the sweep then throws Cancelled).
using SweepCallback = std::function<bool(int64_t done, int64_t total)>;

/// The experts [begin, end) a sweep removes in turn: all of them (end < 0), or a shard's share
/// (analysis/sweep_shards.h).
struct ExpertRange {
  int64_t begin = 0;
  int64_t end = -1;  ///< < 0: to the last expert
  /// [begin, end) clipped to `experts`; UsageError for a range outside them or empty.
  ExpertRange within(int64_t experts) const;
};

/// Fills a sweep's mean polysemanticity (over experts with an effect; NaN if none) and count.
void summarise_sweep(SweepOutcome& sweep);

}  // namespace mumoe::analysis
