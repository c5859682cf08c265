#include "analysis/lm_ablation_results.h"

#include <limits>

#include "analysis/result_json.h"

namespace mumoe::analysis {

nlohmann::json to_json(const LmAblationReport& r) {
  nlohmann::json experts = nlohmann::json::array();
  for (const auto& e : r.experts) {
    auto j = to_json(e.outcome);
    j["loss_after"] = e.loss_after;
    j["affected_tokens"] = e.outcome.affected_samples;
    j["affected_sequences"] = e.affected_sequences;
    experts.push_back(std::move(j));
  }
  return {{"layer_index", r.layer},
          {"method", to_string(r.method)},
          {"class_tokens", r.baseline.class_tokens},
          {"class_names", r.baseline.class_names},
          {"per_class_accuracy_before", r.baseline.before.per_class},
          {"correct_before", r.baseline.before.correct},
          {"count", r.baseline.before.count},
          {"accuracy_before", r.baseline.before.overall},
          {"loss_before", r.baseline.loss_before},
          {"tokens", r.baseline.tokens},
          {"sequences", r.baseline.sequences},
          {"experts", experts},
          {"mean_polysemanticity", number_or_null(r.mean_polysemanticity)},
          {"experts_with_effect", r.experts_with_effect},
          {"compute_seconds", r.seconds}};
}

LmAblationReport lm_ablation_report_from_json(const nlohmann::json& j) {
  LmAblationReport r;
  r.layer = j.at("layer_index");
  r.method = parse_ablation_method(j.at("method"));
  r.baseline.class_tokens = j.at("class_tokens").get<std::vector<int32_t>>();
  r.baseline.class_names = j.at("class_names").get<std::vector<std::string>>();
  r.baseline.before.per_class = j.at("per_class_accuracy_before").get<std::vector<double>>();
  r.baseline.before.correct = j.at("correct_before").get<std::vector<int64_t>>();
  r.baseline.before.count = j.at("count").get<std::vector<int64_t>>();
  r.baseline.before.overall = j.at("accuracy_before");
  r.baseline.loss_before = j.at("loss_before");
  r.baseline.tokens = j.at("tokens");
  r.baseline.sequences = j.at("sequences");
  for (const auto& e : j.at("experts")) {
    LmAblationOutcome o;
    o.outcome = ablation_outcome_from_json(e);
    o.loss_after = e.at("loss_after");
    o.affected_sequences = e.at("affected_sequences");
    r.experts.push_back(std::move(o));
  }
  r.mean_polysemanticity = number_from(j.at("mean_polysemanticity"));
  r.experts_with_effect = j.at("experts_with_effect");
  r.seconds = j.at("compute_seconds");
  return r;
}

void summarise(LmAblationReport& r) {
  double sum = 0;
  r.experts_with_effect = 0;
  for (const auto& e : r.experts)
    if (e.outcome.has_effect) {
      sum += e.outcome.polysemanticity;
      ++r.experts_with_effect;
    }
  r.mean_polysemanticity =
      r.experts_with_effect ? sum / r.experts_with_effect : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace mumoe::analysis
