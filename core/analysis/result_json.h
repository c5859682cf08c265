// JSON forms of analysis results: the CLI's --json output and what the cache's results table
// stores, so a cached answer reads back into the same structs. NaN (e.g. the mean
// polysemanticity of a sweep where no expert had an effect) is written as null.
#pragma once

#include <nlohmann/json.hpp>

#include "analysis/ablation_results.h"
#include "analysis/expert_statistics.h"
#include "analysis/gallery.h"

namespace mumoe::analysis {

nlohmann::json to_json(const ClassAccuracy& a);
ClassAccuracy class_accuracy_from_json(const nlohmann::json& j);

nlohmann::json to_json(const ModeStatistics& s);
ModeStatistics mode_statistics_from_json(const nlohmann::json& j);

/// {mode, expert, order, threshold, count, seed}: a gallery request, also inside every gallery's JSON.
nlohmann::json to_json(const GalleryRequest& r);
GalleryRequest gallery_request_from_json(const nlohmann::json& j);

nlohmann::json to_json(const Gallery& g);
Gallery gallery_from_json(const nlohmann::json& j);

/// {expert (or experts), per_class_accuracy_after, accuracy_after, accuracy_drop,
///  accuracy_drop_reference, polysemanticity, has_effect, affected_samples, changed_predictions}.
/// Every relative figure is against the unablated model on the same data; the JSON says so in
/// accuracy_drop_reference (kAccuracyDropReference).
extern const char* const kAccuracyDropReference;
nlohmann::json to_json(const AblationOutcome& o);
AblationOutcome ablation_outcome_from_json(const nlohmann::json& j);

nlohmann::json to_json(const SweepOutcome& s);
SweepOutcome sweep_outcome_from_json(const nlohmann::json& j);

/// x, or null for NaN; and back.
nlohmann::json number_or_null(double x);
double number_from(const nlohmann::json& j);

}  // namespace mumoe::analysis
