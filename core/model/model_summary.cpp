#include "model/model_summary.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include <filesystem>

#include "io/errors.h"
#include "model/classifier_file.h"
#include "model/gpt_file.h"
#include "model/manifest.h"
#include "model/model_file.h"
#include "model/state_dict_layout.h"
#include "nn/backbone_config.h"

namespace mumoe::model {

int64_t ModelSummary::total_parameters() const {
  int64_t total = 0;
  for (const auto& l : layers) total += l.total_parameters();
  return total;
}

const char* to_string(ModelKind kind) {
  switch (kind) {
    case ModelKind::MultiLabel: return "multi-label";
    case ModelKind::Gpt: return "gpt";
    default: return "multi-class";
  }
}

ModelKind model_kind(const ModelFile& file) {
  const auto& m = file.manifest();
  if (m.architecture == kGptArchitecture) return ModelKind::Gpt;
  if (file.inferred()) {
    if (is_nanogpt_layout(file.tensor_names())) return ModelKind::Gpt;
    for (const auto& l : m.layers)
      if (l.name.rfind("transformer.h.", 0) == 0) return ModelKind::Gpt;
  }
  return m.task == kMultiLabel ? ModelKind::MultiLabel : ModelKind::MultiClass;
}

ModelSummary summarize_model_file(const std::string& path, const LayoutOverrides& overrides) {
  const auto file = ModelFile::load(path, overrides);
  ModelSummary s;
  s.path = path;
  std::error_code ec;
  s.file_bytes = std::filesystem::file_size(path, ec);
  s.inferred = file.inferred();
  s.manifest_beside = file.manifest_beside();
  s.file_format = file.format_name();
  s.format_version = file.inferred() ? 0 : file.manifest().format_version;
  const auto& m = file.manifest();
  s.architecture = file.inferred() && m.architecture != kImageClassifierArchitecture ? "pytorch-state-dict" : m.architecture;
  s.kind = model_kind(file);
  if (m.architecture_config.contains("backbone")) {
    s.backbone = manifest_backbone(m, path).describe();
    s.backbone_json = m.architecture_config.at("backbone").dump();
    s.backbone_prefix = m.architecture_config.value("backbone_prefix", std::string("backbone."));
    s.backbone_preset = m.architecture_config.value("backbone_preset", std::string());
  }
  for (const auto& l : file.manifest().layers)
    s.layers.push_back({l.name, l.prefix, l.config, l.is_router() ? nn::ParameterCount{} : nn::count_parameters(l.config),
                        l.router});
  s.label_names = file.manifest().label_names;
  s.attribute_names = file.manifest().attribute_names;
  s.provenance_json = file.manifest().provenance.dump();
  if (const auto& p = file.manifest().provenance; p.is_object() && p.contains("notes") && p.at("notes").is_array())
    for (const auto& note : p.at("notes"))
      if (note.is_string()) s.notes.push_back(note.get<std::string>());
  s.tensor_count = static_cast<int64_t>(file.tensor_names().size());
  if (s.kind == ModelKind::Gpt && file.inferred()) {
    s.gpt_json = nn::to_json(infer_gpt_config(file, overrides.vit_heads));
    switch (gpt_head_count_source(file, overrides.vit_heads)) {
      case HeadCountSource::Given: s.gpt_heads_from = "given"; break;
      case HeadCountSource::ModelArgs: s.gpt_heads_from = "model_args"; break;
      default: s.gpt_heads_from = "guessed"; break;
    }
  }
  return s;
}

std::string LayerSummary::router_description() const {
  if (!router) return "";
  const auto& r = *router;
  std::string text = nn::display_name(r.router) + ": " + std::to_string(r.input_dim) + " → " +
                     (r.hidden_dim > 0 ? std::to_string(r.hidden_dim) + " → GELU → " : "") + std::to_string(r.output_dim) +
                     ", " + std::to_string(r.experts) + " experts";
  if (r.router == nn::RouterKind::SoftMoE) return text + ", " + std::to_string(r.slots_per_expert) + " slot(s) each";
  char factor[32];
  std::snprintf(factor, sizeof factor, "%g", r.capacity_factor);
  if (nn::is_token_choice(r.router)) text += ", top-" + std::to_string(r.k);
  if (r.sequence_groups)
    return text + ", capacity factor " + factor + ", each sequence one group (buffers of " +
           std::to_string(r.group_size) + " tokens)";
  return text + ", capacity factor " + factor + ", groups of " + std::to_string(r.group_size);
}

std::string format_description(const ModelSummary& s) {
  if (s.inferred)
    return "PyTorch state_dict in a " + s.file_format + " file (configuration inferred from key names and shapes)";
  if (s.manifest_beside) {
    const auto sidecar = manifest_sidecar_path(s.path);
    return s.file_format + " file, configured by " + sidecar.substr(sidecar.find_last_of('/') + 1) +
           " beside it (saved opening choices, or written by mumoe-studio)";
  }
  return "mumoe model file, version " + std::to_string(s.format_version);
}

std::string summary_to_json(const ModelSummary& s, int indent) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : s.layers) {
    if (l.router) {
      layers.push_back({{"name", l.name},
                        {"prefix", l.prefix},
                        {"variant", nn::to_string(l.router->router)},
                        {"family", nn::display_name(l.router->router)},
                        {"hierarchy", 1},
                        {"experts_per_mode", {l.router->experts}},
                        {"total_experts", l.router->experts},
                        {"two_layer_block", false},
                        {"router_config", to_json(*l.router)},
                        {"parameters", {{"total", l.total_parameters()}}}});
      continue;
    }
    auto config = to_json(l.config);
    layers.push_back({{"name", l.name},
                      {"prefix", l.prefix},
                      {"variant", l.config.variant_name()},
                      {"hierarchy", l.config.hierarchy()},
                      {"experts_per_mode", l.config.expert_dims},
                      {"total_experts", l.config.total_experts()},
                      {"two_layer_block", l.config.is_block()},
                      {"config", config},
                      {"parameters",
                       {{"factors", l.parameters.factors},
                        {"gating", l.parameters.gating},
                        {"input_norm", l.parameters.input_norm},
                        {"total", l.parameters.total()}}}});
  }
  nlohmann::json j = {{"file", s.path},
                      {"file_bytes", s.file_bytes},
                      {"format", s.inferred ? "pytorch-state-dict" : kFormatName},
                      {"format_version", s.format_version},
                      {"file_format", s.file_format},
                      {"format", format_description(s)},
                      {"architecture", s.architecture},
                      {"kind", to_string(s.kind)},
                      {"inferred", s.inferred},
                      {"backbone", s.backbone_json.empty() ? nlohmann::json() : nlohmann::json::parse(s.backbone_json)},
                      {"backbone_prefix", s.backbone_prefix},
                      {"backbone_preset", s.backbone_preset},
                      {"tensor_count", s.tensor_count},
                      {"layers", layers},
                      {"total_parameters", s.total_parameters()},
                      {"label_names", s.label_names},
                      {"attribute_names", s.attribute_names},
                      {"provenance", nlohmann::json::parse(s.provenance_json)}};
  if (!s.gpt_json.is_null()) j["gpt"] = {{"config", s.gpt_json}, {"heads_from", s.gpt_heads_from}};
  j["notes"] = s.notes;
  return j.dump(indent);
}

}  // namespace mumoe::model
