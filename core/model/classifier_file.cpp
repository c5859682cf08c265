#include "model/classifier_file.h"

#include <torch/torch.h>

#include <set>

#include "io/errors.h"

namespace mumoe::model {

Manifest image_classifier_manifest(const nn::ImageClassifier& classifier, std::vector<std::string> label_names,
                                   nlohmann::json provenance) {
  Manifest m;
  m.architecture = kImageClassifierArchitecture;
  m.architecture_config = {{"backbone", nn::to_json(classifier->backbone_config())}};
  if (classifier->has_router_head())
    m.layers = {{"head", "head.", {}, false, classifier->router_head()->config()}};
  else if (classifier->has_linear_head())
    m.architecture_config["linear_head"] = {{"prefix", "head."}, {"classes", classifier->class_count()}};
  else
    m.layers = {{"head", "head.", classifier->head()->config(), false, std::nullopt}};
  for (auto& layer : backbone_layers(classifier->backbone_config(), "backbone.")) m.layers.push_back(std::move(layer));
  m.label_names = std::move(label_names);
  m.provenance = std::move(provenance);
  return m;
}

void save_image_classifier(const std::string& path, const nn::ImageClassifier& classifier,
                           const Manifest& manifest, const io::WriteProgress& progress) {
  std::vector<io::NamedTensor> tensors;
  for (const auto& p : classifier->named_parameters()) tensors.push_back({p.key(), p.value()});
  for (const auto& b : classifier->named_buffers()) tensors.push_back({b.key(), b.value()});
  save_model_file(path, manifest, tensors, progress);
}

std::vector<ModelLayer> backbone_layers(const nn::BackboneConfig& backbone, const std::string& prefix) {
  std::vector<ModelLayer> layers;
  for (const auto& [block, config] : backbone.vit.mumoe_mlps)
    layers.push_back({vit_mlp_layer_name(block), prefix + vit_mlp_layer_name(block) + ".", config, false, std::nullopt});
  for (const auto& [block, config] : backbone.vit.router_mlps)
    layers.push_back({vit_mlp_layer_name(block), prefix + vit_mlp_layer_name(block) + ".", {}, false, config});
  // A Mixer's in forward order: each block's token mixing, then its channel mixing.
  for (int64_t block = 0; backbone.kind == nn::BackboneKind::MlpMixer && block < backbone.mixer.depth; ++block)
    for (const bool token : {true, false}) {
      const auto& map = token ? backbone.mixer.token_mumoe : backbone.mixer.channel_mumoe;
      if (auto it = map.find(block); it != map.end())
        layers.push_back({mixer_layer_name(block, token), prefix + mixer_layer_name(block, token) + ".", it->second,
                          false, std::nullopt});
    }
  return layers;
}

std::string classifier_file_key(const ModelFile& file, const std::string& module_key) {
  static const std::string kBackbone = "backbone.", kHead = "head.";
  if (module_key.rfind(kHead, 0) == 0) {
    if (const auto linear = manifest_linear_head(file.manifest(), file.path()))
      return linear->prefix + module_key.substr(kHead.size());
    return file_key(file.layer("head"), module_key.substr(kHead.size()));
  }
  if (module_key.rfind(kBackbone, 0) == 0)
    return file.manifest().architecture_config.value("backbone_prefix", kBackbone) +
           module_key.substr(kBackbone.size());
  throw Error("image classifier key '" + module_key + "' is neither backbone nor head");
}

namespace {

// Every tensor of the file must be one of the classifier's: a key left over means the layout was
// misread (a timm model saved with its own head, register tokens, q/k norms, …).
void check_no_foreign_tensors(const ModelFile& file, const nn::ImageClassifier& classifier) {
  std::set<std::string> known;
  for (const auto& p : classifier->named_parameters()) known.insert(classifier_file_key(file, p.key()));
  for (const auto& b : classifier->named_buffers()) known.insert(classifier_file_key(file, b.key()));
  std::vector<std::string> foreign;
  for (const auto& name : file.tensor_names())
    if (!known.count(name)) foreign.push_back(file.original_name(name));
  if (foreign.empty()) return;
  std::string list;
  for (size_t i = 0; i < foreign.size() && i < 4; ++i) list += (i ? ", " : "") + foreign[i];
  if (foreign.size() > 4) list += ", … (" + std::to_string(foreign.size()) + " in all)";
  const auto head = classifier->has_linear_head() ? std::string("Linear") : file.layer("head").family();
  throw FileError(file.path(), "holds tensors that a " + classifier->backbone_config().describe() + " with its " +
                                   head + " head does not have: " + list);
}

}  // namespace

nn::BackboneConfig manifest_backbone(const Manifest& m, const std::string& path) {
  if (!m.architecture_config.contains("backbone"))
    throw FileError(path, "manifest: architecture_config lacks 'backbone'");
  nn::BackboneConfig backbone;
  try {
    backbone = nn::backbone_config_from_json(m.architecture_config.at("backbone"));
  } catch (const UsageError& e) {
    throw FileError(path, std::string("manifest: ") + e.what());
  }
  const bool mixer = backbone.kind == nn::BackboneKind::MlpMixer;
  for (const auto& layer : m.layers) {
    if (layer.name == "head") continue;
    const auto step = backbone_layer_step(layer.name);
    const bool fits = step && (mixer ? layer.name.rfind("mixer_blocks.", 0) == 0 && !layer.is_router()
                                     : backbone.kind == nn::BackboneKind::VisionTransformer &&
                                           vit_mlp_block(layer.name).has_value());
    if (!fits)
      throw FileError(path, "manifest: layer '" + layer.name + "' is neither the head nor a μMoE layer of the " +
                                backbone.type_name() + " backbone");
    if (layer.legacy_factor_keys) throw FileError(path, "manifest: layer '" + layer.name + "' has legacy keys");
    bool added = false;
    if (mixer)
      added = (*step % 2 ? backbone.mixer.channel_mumoe : backbone.mixer.token_mumoe).emplace(*step / 2, layer.config).second;
    else
      added = layer.is_router() ? backbone.vit.router_mlps.emplace(*step, *layer.router).second
                                : backbone.vit.mumoe_mlps.emplace(*step, layer.config).second;
    if (!added || (!mixer && backbone.vit.router_mlps.count(*step) + backbone.vit.mumoe_mlps.count(*step) > 1))
      throw FileError(path, "manifest: layer '" + layer.name + "' is listed twice");
  }
  try {
    backbone.validate();
  } catch (const UsageError& e) {
    throw FileError(path, std::string("manifest: ") + e.what());
  }
  return backbone;
}

nn::ImageClassifier load_image_classifier(const ModelFile& file) {
  const auto& m = file.manifest();
  if (m.architecture != kImageClassifierArchitecture)
    throw FileError(file.path(), "is a '" + m.architecture + "' model, not an image classifier");
  auto backbone = manifest_backbone(m, file.path());
  nn::ImageClassifier classifier{nullptr};
  if (const auto linear = manifest_linear_head(m, file.path())) {
    classifier = nn::ImageClassifier(backbone, nn::LinearHeadConfig{backbone.feature_dim, linear->classes});
  } else {
    const auto& head = file.layer("head");
    classifier = head.is_router() ? nn::ImageClassifier(backbone, *head.router) : nn::ImageClassifier(backbone, head.config);
  }
  check_no_foreign_tensors(file, classifier);
  file.load_into(*classifier, [&file](const std::string& key) { return classifier_file_key(file, key); });
  classifier->eval();
  return classifier;
}

}  // namespace mumoe::model
