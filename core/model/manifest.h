// The manifest stored in a mumoe model file's safetensors "__metadata__" (key "mumoe.manifest").
//
// It makes a model file self-describing: format version, architecture, every μMoE layer's
// configuration and where its tensors live (prefix), label and attribute names, and provenance
// (training command, data, metrics, edits …) as free-form JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nn/backbone_config.h"
#include "nn/layer_config.h"
#include "nn/moe_layer_config.h"

namespace mumoe::model {

inline constexpr const char* kManifestMetadataKey = "mumoe.manifest";
inline constexpr const char* kFormatName = "mumoe-studio-model";
inline constexpr int kFormatVersion = 1;
inline constexpr const char* kMultiClass = "multiclass";
inline constexpr const char* kMultiLabel = "multilabel";

/// One expert layer of a model: its tensors are "<prefix><key>". Most are μMoE layers or blocks
/// (`config`, reference key layout). A sparse or soft MoE layer of the router study (nn/moe_layer.h)
/// has `router` set instead (its keys: router, experts_w1, experts_b1, experts_w2, experts_b2;
/// `config` is unused); only bare heads of a "mumoe-layers" file are written that way so far.
struct ModelLayer {
  std::string name;    ///< what users type after --layer ("head", "transformer.h.0.mlp.MuMoE_layer")
  std::string prefix;  ///< "" or ends with '.'
  nn::LayerConfig config;
  /// Pre-release (MMoE) checkpoints store "factors.k" where the current code has "MuMoE.factors.k".
  bool legacy_factor_keys = false;
  std::optional<nn::MoELayerConfig> router;

  bool is_router() const { return router.has_value(); }
  /// "μMoE CP", "μMoE TR", "Soft MoE", "Softmax Token Choice", …
  std::string family() const;
  /// The experts of its first (or only) expert mode, and its output width.
  int64_t experts() const;
  int64_t input_dim() const;
  int64_t output_dim() const;
  int64_t parameter_count() const;
};

struct Manifest {
  int format_version = kFormatVersion;
  /// "mumoe-layers": the file is a set of standalone μMoE layers/blocks;
  /// "image-classifier": a CNN backbone ("backbone.*") with a μMoE head ("head.*").
  std::string architecture = "mumoe-layers";
  /// What the architecture needs beyond its μMoE layers (e.g. {"backbone": {...}}).
  nlohmann::json architecture_config = nlohmann::json::object();
  std::vector<ModelLayer> layers;
  std::vector<std::string> label_names;
  /// kMultiClass: one softmax over label_names; kMultiLabel: one independent binary output per
  /// label name, each the data attribute of that name (trained with BCE).
  std::string task = "multiclass";
  std::vector<std::string> attribute_names;
  nlohmann::json provenance = nlohmann::json::object();
};

/// Where a plain Linear head's tensors are ("weight", "bias" after the prefix) and its classes:
/// the manifest's architecture_config "linear_head" (an MLP-Mixer's head.2). Such a classifier has
/// no manifest layer "head"; its μMoE layers are all in the backbone.
struct LinearHead {
  std::string prefix;
  int64_t classes = 0;
};
/// The manifest's Linear head, or nothing when its head is a μMoE or router layer "head". Throws
/// FileError(path, "manifest: …") when it is malformed.
std::optional<LinearHead> manifest_linear_head(const Manifest& manifest, const std::string& path);

/// "blocks.{block}.mlp": the layer name of a ViT block's μMoE MLP in an image classifier's
/// manifest (model/classifier_file.h).
std::string vit_mlp_layer_name(int64_t block);
/// The block of a layer named "blocks.{i}.mlp", or nothing for any other name.
std::optional<int64_t> vit_mlp_block(const std::string& layer_name);
/// "mixer_blocks.{block}.0.fn.1" (token mixing) or "mixer_blocks.{block}.1.fn" (channel mixing):
/// the names of an MLP-Mixer's μMoE mixing MLPs, which are their reference module paths.
std::string mixer_layer_name(int64_t block, bool token_mixing);
/// The TokenBackbone step (nn/vision_backbones.h) of an expert layer inside a backbone: i for a
/// ViT's "blocks.{i}.mlp", 2i for a Mixer's "mixer_blocks.{i}.0.fn.1", 2i + 1 for its
/// "mixer_blocks.{i}.1.fn"; nothing for any other name (a head, a bare layer).
std::optional<int64_t> backbone_layer_step(const std::string& layer_name);
/// The inverse, for a backbone of `kind`.
std::string backbone_layer_name(nn::BackboneKind kind, int64_t step);

nlohmann::json to_json(const nn::LayerConfig& config);
nlohmann::json to_json(const nn::MoELayerConfig& config);
/// The layer's configuration as JSON: to_json(config) or, for a router layer, to_json(*router).
nlohmann::json layer_config_json(const ModelLayer& layer);
nlohmann::json to_json(const Manifest& manifest);

/// Parses and validates; throws FileError(path, "manifest: …") naming the bad field.
nn::LayerConfig layer_config_from_json(const nlohmann::json& json, const std::string& path);
nn::MoELayerConfig router_config_from_json(const nlohmann::json& json, const std::string& path);
Manifest manifest_from_json(const nlohmann::json& json, const std::string& path);

}  // namespace mumoe::model
