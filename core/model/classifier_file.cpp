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
  else
    m.layers = {{"head", "head.", classifier->head()->config(), false, std::nullopt}};
  for (const auto& [block, config] : classifier->backbone_config().vit.mumoe_mlps)
    m.layers.push_back({vit_mlp_layer_name(block), "backbone." + vit_mlp_layer_name(block) + ".", config, false, std::nullopt});
  for (const auto& [block, config] : classifier->backbone_config().vit.router_mlps)
    m.layers.push_back({vit_mlp_layer_name(block), "backbone." + vit_mlp_layer_name(block) + ".", {}, false, config});
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

std::string classifier_file_key(const ModelFile& file, const std::string& module_key) {
  static const std::string kBackbone = "backbone.", kHead = "head.";
  if (module_key.rfind(kHead, 0) == 0) return file_key(file.layer("head"), module_key.substr(kHead.size()));
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
  throw FileError(file.path(), "holds tensors that a " + classifier->backbone_config().describe() +
                                   " with its " + file.layer("head").family() + " head does not have: " + list);
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
  for (const auto& layer : m.layers) {
    if (layer.name == "head") continue;
    const auto block = vit_mlp_block(layer.name);
    if (!block || backbone.kind != nn::BackboneKind::VisionTransformer)
      throw FileError(path, "manifest: layer '" + layer.name + "' is neither the head nor a ViT block's MLP");
    if (layer.legacy_factor_keys) throw FileError(path, "manifest: layer '" + layer.name + "' has legacy keys");
    const bool added = layer.is_router() ? backbone.vit.router_mlps.emplace(*block, *layer.router).second
                                         : backbone.vit.mumoe_mlps.emplace(*block, layer.config).second;
    if (!added || backbone.vit.router_mlps.count(*block) + backbone.vit.mumoe_mlps.count(*block) > 1)
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
  const auto& head = file.layer("head");
  auto classifier = head.is_router() ? nn::ImageClassifier(manifest_backbone(m, file.path()), *head.router)
                                     : nn::ImageClassifier(manifest_backbone(m, file.path()), head.config);
  check_no_foreign_tensors(file, classifier);
  file.load_into(*classifier, [&file](const std::string& key) { return classifier_file_key(file, key); });
  classifier->eval();
  return classifier;
}

}  // namespace mumoe::model
