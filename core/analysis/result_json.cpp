#include "analysis/result_json.h"

#include <cmath>
#include <limits>


namespace mumoe::analysis {

nlohmann::json number_or_null(double x) { return std::isnan(x) ? nlohmann::json(nullptr) : nlohmann::json(x); }
double number_from(const nlohmann::json& j) {
  return j.is_null() ? std::numeric_limits<double>::quiet_NaN() : j.get<double>();
}

nlohmann::json to_json(const ClassAccuracy& a) {
  return {{"per_class", a.per_class}, {"correct", a.correct}, {"count", a.count}, {"overall", a.overall}};
}

ClassAccuracy class_accuracy_from_json(const nlohmann::json& j) {
  ClassAccuracy a;
  a.per_class = j.at("per_class").get<std::vector<double>>();
  a.correct = j.at("correct").get<std::vector<int64_t>>();
  a.count = j.at("count").get<std::vector<int64_t>>();
  a.overall = j.at("overall").get<double>();
  return a;
}

nlohmann::json to_json(const ModeStatistics& s) {
  nlohmann::json experts = nlohmann::json::array();
  for (const auto& e : s.experts) {
    nlohmann::json top = nlohmann::json::array();
    for (const auto& [c, n] : e.top_classes) top.push_back({{"class", c}, {"samples", n}});
    experts.push_back({{"expert", e.expert},
                       {"load", e.load},
                       {"support", e.support},
                       {"argmax_count", e.argmax_count},
                       {"mean_coefficient", e.mean_coefficient},
                       {"dead", e.dead},
                       {"top_classes", top}});
  }
  nlohmann::json j = {{"mode", s.mode},
          {"threshold", s.threshold},
          {"samples", s.samples},
          {"dead_experts", s.dead_experts},
          {"mean_active_experts", s.mean_active_experts},
          {"gate_entropy_bits", s.gate_entropy_bits},
          {"utilisation_entropy_bits", s.utilisation_entropy_bits},
          {"expert_entropy_bits", s.expert_entropy_bits},
          {"class_entropy_bits", s.class_entropy_bits},
          {"mutual_information_bits", s.mutual_information_bits},
          {"expert_class_counts", s.expert_class_counts},
          {"experts", experts}};
  if (s.multilabel) j["multilabel"] = true;
  return j;
}

ModeStatistics mode_statistics_from_json(const nlohmann::json& j) {
  ModeStatistics s;
  s.mode = j.at("mode");
  s.multilabel = j.value("multilabel", false);
  s.threshold = j.at("threshold");
  s.samples = j.at("samples");
  s.dead_experts = j.at("dead_experts");
  s.mean_active_experts = j.at("mean_active_experts");
  s.gate_entropy_bits = j.at("gate_entropy_bits");
  s.utilisation_entropy_bits = j.at("utilisation_entropy_bits");
  s.expert_entropy_bits = j.at("expert_entropy_bits");
  s.class_entropy_bits = j.at("class_entropy_bits");
  s.mutual_information_bits = j.at("mutual_information_bits");
  s.expert_class_counts = j.at("expert_class_counts").get<std::vector<std::vector<int64_t>>>();
  for (const auto& e : j.at("experts")) {
    ExpertSummary x;
    x.expert = e.at("expert");
    x.load = e.at("load");
    x.support = e.at("support");
    x.argmax_count = e.at("argmax_count");
    x.mean_coefficient = e.at("mean_coefficient");
    x.dead = e.at("dead");
    for (const auto& t : e.at("top_classes")) x.top_classes.emplace_back(t.at("class"), t.at("samples"));
    s.experts.push_back(std::move(x));
  }
  return s;
}

nlohmann::json to_json(const Gallery& g) {
  nlohmann::json items = nlohmann::json::array();
  for (const auto& i : g.items) {
    items.push_back(
        {{"sample", i.sample}, {"label", i.label}, {"prediction", i.prediction}, {"coefficient", i.coefficient}});
    if (i.patch >= 0) items.back()["patch"] = i.patch;
  }
  auto j = to_json(g.request);
  if (g.multilabel) j["multilabel"] = true;
  j["eligible"] = g.eligible;
  j["items"] = items;
  return j;
}

nlohmann::json to_json(const GalleryRequest& r) {
  nlohmann::json j = {{"mode", r.mode},           {"expert", r.expert}, {"order", to_string(r.order)},
                      {"threshold", r.threshold}, {"count", r.count},   {"seed", r.seed}};
  if (!r.subpopulation.empty()) j["subpopulation"] = r.subpopulation;
  return j;
}

GalleryRequest gallery_request_from_json(const nlohmann::json& j) {
  GalleryRequest r;
  r.mode = j.at("mode");
  r.expert = j.at("expert");
  r.order = parse_gallery_order(j.at("order"));
  r.threshold = j.at("threshold");
  r.count = j.at("count");
  r.seed = j.at("seed");
  r.subpopulation = j.value("subpopulation", std::string());
  return r;
}

Gallery gallery_from_json(const nlohmann::json& j) {
  Gallery g;
  g.request = gallery_request_from_json(j);
  g.multilabel = j.value("multilabel", false);
  g.eligible = j.at("eligible");
  for (const auto& i : j.at("items"))
    g.items.push_back({i.at("sample"), i.at("label"), i.at("prediction"), i.at("coefficient"), i.value("patch", int64_t{-1})});
  return g;
}

const char* const kAccuracyDropReference = "unablated model: (accuracy before - after) / accuracy before, per class (per output of a multi-label model; relative drop)";

nlohmann::json to_json(const AblationOutcome& o) {
  nlohmann::json j = {{"mode", o.mode},
                      {"experts", o.experts},
                      {"per_class_accuracy_after", o.after.per_class},
                      {"accuracy_after", o.after.overall},
                      {"correct_after", o.after.correct},
                      {"count", o.after.count},
                      {"accuracy_drop", o.drop},
                      {"accuracy_drop_reference", kAccuracyDropReference},
                      {"polysemanticity", o.polysemanticity},
                      {"has_effect", o.has_effect},
                      {"affected_samples", o.affected_samples},
                      {"changed_predictions", o.changed_predictions}};
  if (o.experts.size() == 1) j["expert"] = o.experts[0];
  return j;
}

AblationOutcome ablation_outcome_from_json(const nlohmann::json& j) {
  AblationOutcome o;
  o.mode = j.at("mode");
  o.experts = j.at("experts").get<std::vector<int64_t>>();
  o.after.per_class = j.at("per_class_accuracy_after").get<std::vector<double>>();
  o.after.overall = j.at("accuracy_after");
  o.after.correct = j.at("correct_after").get<std::vector<int64_t>>();
  o.after.count = j.at("count").get<std::vector<int64_t>>();
  o.drop = j.at("accuracy_drop").get<std::vector<double>>();
  o.polysemanticity = j.at("polysemanticity");
  o.has_effect = j.at("has_effect");
  o.affected_samples = j.at("affected_samples");
  o.changed_predictions = j.at("changed_predictions");
  return o;
}

nlohmann::json to_json(const SweepOutcome& s) {
  nlohmann::json experts = nlohmann::json::array();
  for (const auto& o : s.experts) experts.push_back(to_json(o));
  return {{"mode", s.mode},
          {"method", to_string(s.method)},
          {"mean_polysemanticity", number_or_null(s.mean_polysemanticity)},
          {"experts_with_effect", s.experts_with_effect},
          {"seconds", s.seconds},
          {"experts", experts}};
}

SweepOutcome sweep_outcome_from_json(const nlohmann::json& j) {
  SweepOutcome s;
  s.mode = j.at("mode");
  s.method = parse_ablation_method(j.at("method"));
  s.mean_polysemanticity = number_from(j.at("mean_polysemanticity"));
  s.experts_with_effect = j.at("experts_with_effect");
  s.seconds = j.at("seconds");
  for (const auto& o : j.at("experts")) s.experts.push_back(ablation_outcome_from_json(o));
  return s;
}

}  // namespace mumoe::analysis
