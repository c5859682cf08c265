// What ablating experts of a μMoE GPT's MLP block reports (torch-free, so GUI code can include
// it; the engine is lm_ablation.h). The metric is next-token prediction: a token is a sample,
// its class is the target byte, and only classes that occur in the evaluation set are classes
// (so d and polysemanticity, spec §4, range over those).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/ablation_results.h"

namespace mumoe::analysis {

/// The unablated model on the evaluation tokens.
struct LmBaseline {
  std::vector<int32_t> class_tokens;      ///< class c is target token class_tokens[c] (ascending)
  std::vector<std::string> class_names;   ///< their display text ("e", "\n", "\xe2")
  ClassAccuracy before;                   ///< next-token accuracy per class and overall
  double loss_before = 0;                 ///< mean cross-entropy, nats/token
  int64_t tokens = 0;
  int64_t sequences = 0;
};

struct LmAblationOutcome {
  /// experts, per-class accuracy after, d, polysemanticity, has_effect; affected_samples counts
  /// tokens with a_n > 0 for some ablated n, changed_predictions tokens whose argmax changed.
  AblationOutcome outcome;
  double loss_after = 0;
  int64_t affected_sequences = 0;  ///< sequences holding an affected token (what sparse recomputes)
};

/// One ablation (one entry in experts) or a sweep (one entry per expert, in order).
struct LmAblationReport {
  int64_t layer = 0;
  AblationMethod method = AblationMethod::Sparse;
  LmBaseline baseline;
  std::vector<LmAblationOutcome> experts;
  double mean_polysemanticity = 0;  ///< over entries with has_effect (NaN if none)
  int64_t experts_with_effect = 0;
  double seconds = 0;               ///< compute time (baseline pass included when it ran)
};

/// The CLI's JSON fields (class_names, per_class_accuracy_before, accuracy_before, loss_before,
/// experts: [{expert, per_class_accuracy_after, accuracy_after, loss_after, polysemanticity, …}],
/// mean_polysemanticity, experts_with_effect, compute_seconds), also what the cache stores.
nlohmann::json to_json(const LmAblationReport& r);
LmAblationReport lm_ablation_report_from_json(const nlohmann::json& j);

/// Fills mean_polysemanticity and experts_with_effect from the entries.
void summarise(LmAblationReport& r);

}  // namespace mumoe::analysis
