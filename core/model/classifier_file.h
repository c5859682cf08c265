// Model files of the "image-classifier" architecture: an image backbone with a μMoE head, or with
// a router layer as the head (its manifest layer "head" carries router_config; nn/moe_layer.h).
//
// Our own files keep the module's keys ("backbone.…", "head.…"). A user's state dict keeps its
// own: architecture_config.backbone_prefix says where the backbone's keys are ("0.", "") and the
// head layer's prefix where the head's are ("1.", "fc."); classifier_file_key maps between them.
//
// A ViT whose blocks' MLPs are μMoE blocks lists each of them as a manifest layer named
// "blocks.{i}.mlp" (prefix: where its keys are, "backbone.blocks.{i}.mlp." in our own files),
// beside "head" (model/manifest.h: vit_mlp_layer_name); load_image_classifier builds those
// blocks from these layers.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/model_file.h"
#include "nn/image_classifier.h"

namespace mumoe::model {

inline constexpr const char* kImageClassifierArchitecture = "image-classifier";

/// The expert layers inside `backbone` as manifest layers whose keys start with `prefix`
/// ("backbone." in our files): a ViT's "blocks.{i}.mlp", a Mixer's "mixer_blocks.{i}.0.fn.1" and
/// "mixer_blocks.{i}.1.fn", in forward order.
std::vector<ModelLayer> backbone_layers(const nn::BackboneConfig& backbone, const std::string& prefix);

/// The manifest describing `classifier` (head layer "head", a ViT's μMoE MLPs as layers
/// "blocks.{i}.mlp", backbone in architecture_config).
Manifest image_classifier_manifest(const nn::ImageClassifier& classifier, std::vector<std::string> label_names,
                                   nlohmann::json provenance);

/// Writes the classifier's parameters and buffers with `manifest`, atomically.
void save_image_classifier(const std::string& path, const nn::ImageClassifier& classifier,
                           const Manifest& manifest, const io::WriteProgress& progress = {});

/// The (prefix-stripped) file key of the classifier module's key "backbone.X" or "head.X".
std::string classifier_file_key(const ModelFile& file, const std::string& module_key);

/// The backbone an image-classifier manifest describes, with a ViT's μMoE MLPs from its
/// "blocks.{i}.mlp" layers, validated. Throws FileError(path, "manifest: …").
nn::BackboneConfig manifest_backbone(const Manifest& manifest, const std::string& path);

/// Builds the classifier stored in `file` (eval mode, CPU). Throws FileError when the file is not
/// an image classifier, its tensors do not fit, or it holds tensors the classifier does not have
/// (a timm model with its own classifier head, register tokens, …) — checked before any tensor
/// data is read.
nn::ImageClassifier load_image_classifier(const ModelFile& file);

}  // namespace mumoe::model
