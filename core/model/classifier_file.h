// Model files of the "image-classifier" architecture: a CNN backbone with a μMoE head.
#pragma once

#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/model_file.h"
#include "nn/image_classifier.h"

namespace mumoe::model {

inline constexpr const char* kImageClassifierArchitecture = "image-classifier";

/// The manifest describing `classifier` (head layer "head", backbone in architecture_config).
Manifest image_classifier_manifest(const nn::ImageClassifier& classifier, std::vector<std::string> label_names,
                                   nlohmann::json provenance);

/// Writes the classifier's parameters and buffers with `manifest`, atomically.
void save_image_classifier(const std::string& path, const nn::ImageClassifier& classifier,
                           const Manifest& manifest, const io::WriteProgress& progress = {});

/// Builds the classifier stored in `file` (eval mode, CPU). Throws FileError when the file is not
/// an image classifier or its tensors do not fit.
nn::ImageClassifier load_image_classifier(const ModelFile& file);

}  // namespace mumoe::model
