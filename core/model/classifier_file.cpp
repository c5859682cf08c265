#include "model/classifier_file.h"

#include <torch/torch.h>

#include "io/errors.h"

namespace mumoe::model {

Manifest image_classifier_manifest(const nn::ImageClassifier& classifier, std::vector<std::string> label_names,
                                   nlohmann::json provenance) {
  Manifest m;
  m.architecture = kImageClassifierArchitecture;
  m.architecture_config = {{"backbone", nn::to_json(classifier->backbone_config())}};
  m.layers = {{"head", "head.", classifier->head()->config(), false}};
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

nn::ImageClassifier load_image_classifier(const ModelFile& file) {
  const auto& m = file.manifest();
  if (m.architecture != kImageClassifierArchitecture)
    throw FileError(file.path(), "is a '" + m.architecture + "' model, not an image classifier");
  if (!m.architecture_config.contains("backbone"))
    throw FileError(file.path(), "manifest: architecture_config lacks 'backbone'");
  nn::BackboneConfig backbone;
  try {
    backbone = nn::backbone_config_from_json(m.architecture_config.at("backbone"));
  } catch (const UsageError& e) {
    throw FileError(file.path(), std::string("manifest: ") + e.what());
  }
  nn::ImageClassifier classifier(backbone, file.layer("head").config);
  file.load_into(*classifier, [](const std::string& key) { return key; });
  classifier->eval();
  return classifier;
}

}  // namespace mumoe::model
