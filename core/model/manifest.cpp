#include "model/manifest.h"

#include "io/errors.h"

namespace mumoe::model {
namespace {

template <typename T>
T field(const nlohmann::json& j, const char* key, const std::string& path, const std::string& where) {
  if (!j.contains(key)) throw FileError(path, "manifest: " + where + " lacks '" + key + "'");
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw FileError(path, "manifest: " + where + "." + key + " has the wrong type: " + j.at(key).dump());
  }
}

template <typename T>
T optional_field(const nlohmann::json& j, const char* key, T fallback, const std::string& path,
                 const std::string& where) {
  return j.contains(key) ? field<T>(j, key, path, where) : fallback;
}

}  // namespace

nlohmann::json to_json(const nn::LayerConfig& c) {
  nlohmann::json j = {{"factorization", nn::to_string(c.factorization)},
                      {"input_dim", c.input_dim},
                      {"output_dim", c.output_dim},
                      {"expert_dims", c.expert_dims},
                      {"use_bias", c.use_bias},
                      {"gate_norm", nn::to_string(c.gate_norm)},
                      {"gate_activation", nn::to_string(c.gate_activation)},
                      {"input_layer_norm", c.input_layer_norm},
                      {"second_dim", c.second_dim},
                      {"norm_eps", c.norm_eps}};
  if (c.factorization == nn::Factorization::CP)
    j["cp_rank"] = c.cp_rank;
  else
    j["tr_ranks"] = c.tr_ranks;
  return j;
}

nlohmann::json to_json(const Manifest& m) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : m.layers) {
    nlohmann::json entry = {{"name", l.name}, {"prefix", l.prefix}};
    // A router layer has "router_config" where a μMoE layer has "config": a reader that does not
    // know router layers fails on the missing "config" instead of misreading the file.
    entry[l.is_router() ? "router_config" : "config"] = layer_config_json(l);
    if (l.legacy_factor_keys) entry["legacy_factor_keys"] = true;
    layers.push_back(entry);
  }
  return {{"format", kFormatName},           {"format_version", m.format_version},
          {"architecture", m.architecture},  {"architecture_config", m.architecture_config},
          {"layers", layers},
          {"label_names", m.label_names},    {"task", m.task},
          {"attribute_names", m.attribute_names},
          {"provenance", m.provenance}};
}

nn::LayerConfig layer_config_from_json(const nlohmann::json& j, const std::string& path) {
  const std::string where = "layer config";
  if (!j.is_object()) throw FileError(path, "manifest: layer config is not an object");
  nn::LayerConfig c;
  try {
    c.factorization = nn::parse_factorization(field<std::string>(j, "factorization", path, where));
    c.gate_norm = nn::parse_gate_norm(optional_field<std::string>(j, "gate_norm", "batchnorm", path, where));
    c.gate_activation = nn::parse_gate_activation(
        optional_field<std::string>(j, "gate_activation", "entmax15", path, where));
  } catch (const UsageError& e) {
    throw FileError(path, std::string("manifest: ") + e.what());
  }
  c.input_dim = field<int64_t>(j, "input_dim", path, where);
  c.output_dim = field<int64_t>(j, "output_dim", path, where);
  c.expert_dims = field<std::vector<int64_t>>(j, "expert_dims", path, where);
  if (c.factorization == nn::Factorization::CP)
    c.cp_rank = field<int64_t>(j, "cp_rank", path, where);
  else
    c.tr_ranks = field<std::vector<int64_t>>(j, "tr_ranks", path, where);
  c.use_bias = optional_field<bool>(j, "use_bias", true, path, where);
  c.input_layer_norm = optional_field<bool>(j, "input_layer_norm", false, path, where);
  c.second_dim = optional_field<int64_t>(j, "second_dim", 0, path, where);
  c.norm_eps = optional_field<double>(j, "norm_eps", 1e-5, path, where);
  try {
    c.validate();
  } catch (const UsageError& e) {
    throw FileError(path, std::string("manifest: ") + e.what());
  }
  return c;
}

nlohmann::json to_json(const nn::MoELayerConfig& c) {
  nlohmann::json j = {{"router", nn::to_string(c.router)},
          {"input_dim", c.input_dim},
          {"hidden_dim", c.hidden_dim},
          {"output_dim", c.output_dim},
          {"experts", c.experts},
          {"k", c.k},
          {"capacity_factor", c.capacity_factor},
          {"group_size", c.group_size},
          {"slots_per_expert", c.slots_per_expert},
          {"sinkhorn_iterations", c.sinkhorn_iterations},
          {"sparsity_gamma", c.sparsity_gamma},
          {"sparsity_iterations", c.sparsity_iterations}};
  // Written only when set, so that the files of layers that route groups of the batch (all of
  // them before language models had router MLPs) keep their bytes and their cache keys.
  if (c.sequence_groups) j["sequence_groups"] = true;
  return j;
}

nlohmann::json layer_config_json(const ModelLayer& layer) {
  return layer.is_router() ? to_json(*layer.router) : to_json(layer.config);
}

nn::MoELayerConfig router_config_from_json(const nlohmann::json& j, const std::string& path) {
  const std::string where = "router config";
  if (!j.is_object()) throw FileError(path, "manifest: router config is not an object");
  nn::MoELayerConfig c;
  const nn::MoELayerConfig defaults;
  try {
    c.router = nn::parse_router_kind(field<std::string>(j, "router", path, where));
    c.input_dim = field<int64_t>(j, "input_dim", path, where);
    c.output_dim = field<int64_t>(j, "output_dim", path, where);
    c.experts = field<int64_t>(j, "experts", path, where);
    c.hidden_dim = optional_field<int64_t>(j, "hidden_dim", 0, path, where);
    c.k = optional_field<int64_t>(j, "k", defaults.k, path, where);
    c.capacity_factor = optional_field<double>(j, "capacity_factor", defaults.capacity_factor, path, where);
    c.group_size = optional_field<int64_t>(j, "group_size", defaults.group_size, path, where);
    c.sequence_groups = optional_field<bool>(j, "sequence_groups", false, path, where);
    c.slots_per_expert = optional_field<int64_t>(j, "slots_per_expert", defaults.slots_per_expert, path, where);
    c.sinkhorn_iterations =
        optional_field<int64_t>(j, "sinkhorn_iterations", defaults.sinkhorn_iterations, path, where);
    c.sparsity_gamma = optional_field<double>(j, "sparsity_gamma", defaults.sparsity_gamma, path, where);
    c.sparsity_iterations =
        optional_field<int64_t>(j, "sparsity_iterations", defaults.sparsity_iterations, path, where);
    c.validate();
  } catch (const UsageError& e) {
    throw FileError(path, std::string("manifest: ") + e.what());
  }
  return c;
}

std::string ModelLayer::family() const {
  if (is_router()) return nn::display_name(router->router);
  return "μMoE " + config.variant_name();
}

int64_t ModelLayer::experts() const {
  if (is_router()) return router->experts;
  return config.expert_dims.empty() ? 0 : config.expert_dims.front();
}

int64_t ModelLayer::input_dim() const { return is_router() ? router->input_dim : config.input_dim; }
int64_t ModelLayer::output_dim() const { return is_router() ? router->output_dim : config.final_output_dim(); }

int64_t ModelLayer::parameter_count() const {
  return is_router() ? router->parameter_count() : nn::count_parameters(config).total();
}

Manifest manifest_from_json(const nlohmann::json& j, const std::string& path) {
  if (!j.is_object()) throw FileError(path, "manifest is not a JSON object");
  const std::string where = "manifest";
  if (field<std::string>(j, "format", path, where) != kFormatName)
    throw FileError(path, "manifest: format is not '" + std::string(kFormatName) + "'");
  Manifest m;
  m.format_version = field<int>(j, "format_version", path, where);
  if (m.format_version < 1 || m.format_version > kFormatVersion)
    throw FileError(path, "manifest: format_version " + std::to_string(m.format_version) +
                              " is not supported by this build (supports 1–" +
                              std::to_string(kFormatVersion) + "); is the file from a newer mumoe?");
  m.architecture = field<std::string>(j, "architecture", path, where);
  m.architecture_config =
      optional_field<nlohmann::json>(j, "architecture_config", nlohmann::json::object(), path, where);
  const auto layers = field<nlohmann::json>(j, "layers", path, where);
  if (!layers.is_array()) throw FileError(path, "manifest: layers is not a list");
  // Every architecture this program writes has at least one μMoE layer; without one there is
  // nothing to analyse or edit, and the file is not one of ours.
  if (layers.empty()) throw FileError(path, "manifest: layers is empty (a model file holds at least one μMoE layer)");
  for (const auto& l : layers) {
    ModelLayer layer;
    layer.name = field<std::string>(l, "name", path, "layer");
    layer.prefix = field<std::string>(l, "prefix", path, "layer " + layer.name);
    if (l.is_object() && l.contains("router_config"))
      layer.router = router_config_from_json(field<nlohmann::json>(l, "router_config", path, "layer " + layer.name), path);
    else
      layer.config = layer_config_from_json(field<nlohmann::json>(l, "config", path, "layer " + layer.name), path);
    layer.legacy_factor_keys = optional_field<bool>(l, "legacy_factor_keys", false, path, "layer");
    m.layers.push_back(std::move(layer));
  }
  m.label_names = optional_field<std::vector<std::string>>(j, "label_names", {}, path, where);
  m.task = optional_field<std::string>(j, "task", kMultiClass, path, where);
  if (m.task != kMultiClass && m.task != kMultiLabel)
    throw FileError(path, "manifest: task '" + m.task + "' is neither multiclass nor multilabel");
  m.attribute_names = optional_field<std::vector<std::string>>(j, "attribute_names", {}, path, where);
  m.provenance = optional_field<nlohmann::json>(j, "provenance", nlohmann::json::object(), path, where);
  return m;
}

std::optional<LinearHead> manifest_linear_head(const Manifest& m, const std::string& path) {
  if (!m.architecture_config.contains("linear_head")) return std::nullopt;
  const auto& j = m.architecture_config.at("linear_head");
  LinearHead head;
  try {
    head.prefix = j.at("prefix").get<std::string>();
    head.classes = j.at("classes").get<int64_t>();
  } catch (const nlohmann::json::exception& e) {
    throw FileError(path, std::string("manifest: linear_head: ") + e.what());
  }
  if (head.classes <= 0 || (!head.prefix.empty() && head.prefix.back() != '.'))
    throw FileError(path, "manifest: linear_head needs a positive class count and a prefix ending in '.'");
  for (const auto& layer : m.layers)
    if (layer.name == "head") throw FileError(path, "manifest: a Linear head and a μMoE layer 'head' at once");
  return head;
}

std::string vit_mlp_layer_name(int64_t block) { return "blocks." + std::to_string(block) + ".mlp"; }

namespace {

// The number N of a name "<before>N<after>", canonical digits only ("blocks.01.mlp" is not block
// 1's name), or nothing.
std::optional<int64_t> numbered(const std::string& name, const std::string& before, const std::string& after) {
  if (name.size() <= before.size() + after.size() || name.rfind(before, 0) != 0 ||
      name.compare(name.size() - after.size(), after.size(), after) != 0)
    return std::nullopt;
  const auto digits = name.substr(before.size(), name.size() - before.size() - after.size());
  if (digits.empty() || digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string::npos ||
      (digits.size() > 1 && digits[0] == '0'))
    return std::nullopt;
  return std::stoll(digits);
}

}  // namespace

std::optional<int64_t> vit_mlp_block(const std::string& name) { return numbered(name, "blocks.", ".mlp"); }

std::string mixer_layer_name(int64_t block, bool token_mixing) {
  return "mixer_blocks." + std::to_string(block) + (token_mixing ? ".0.fn.1" : ".1.fn");
}

std::optional<int64_t> backbone_layer_step(const std::string& name) {
  if (auto block = vit_mlp_block(name)) return block;
  if (auto block = numbered(name, "mixer_blocks.", ".0.fn.1")) return 2 * *block;
  if (auto block = numbered(name, "mixer_blocks.", ".1.fn")) return 2 * *block + 1;
  return std::nullopt;
}

std::string backbone_layer_name(nn::BackboneKind kind, int64_t step) {
  return kind == nn::BackboneKind::MlpMixer ? mixer_layer_name(step / 2, step % 2 == 0) : vit_mlp_layer_name(step);
}

}  // namespace mumoe::model
