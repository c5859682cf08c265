// A torch-free description of a model file: what `mumoe info` prints and the GUI shows.
//
// This header includes no LibTorch or Qt headers on purpose, so UI code can use it cheaply.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/state_dict_layout.h"
#include "nn/layer_config.h"
#include "nn/moe_layer_config.h"

namespace mumoe::model {

class ModelFile;

/// What a model file holds, for choosing a view: a multi-class classifier (the analysis pages), a
/// multi-label classifier (bias correction) or a μMoE GPT (tokens, steering).
enum class ModelKind { MultiClass, MultiLabel, Gpt };
/// "multi-class", "multi-label", "gpt" (`mumoe info --json`'s "kind").
const char* to_string(ModelKind kind);
/// The kind of a loaded file: a mumoe-gpt file, or a plain state dict with nanoGPT's
/// transformer.h.* μMoE layers, is a GPT; otherwise the manifest's task decides.
ModelKind model_kind(const ModelFile& file);

struct LayerSummary {
  std::string name;
  std::string prefix;
  nn::LayerConfig config;          ///< a μMoE layer's (unused for a router layer)
  nn::ParameterCount parameters;   ///< a μMoE layer's (zero for a router layer)
  /// Set for a sparse or soft MoE layer of the router study (nn/moe_layer_config.h).
  std::optional<nn::MoELayerConfig> router;

  int64_t total_parameters() const { return router ? router->parameter_count() : parameters.total(); }
  /// "Soft MoE: 128 → 10, 16 experts, 1 slot each" — a router layer in one line ("" for μMoE).
  std::string router_description() const;
};

struct ModelSummary {
  std::string path;
  uint64_t file_bytes = 0;
  bool inferred = false;  ///< plain state_dict whose configuration was inferred
  bool manifest_beside = false;  ///< configuration from the manifest beside the file (ModelFile::manifest_beside)
  std::string file_format;  ///< "safetensors" or "PyTorch checkpoint"
  int format_version = 0;
  std::string architecture;
  ModelKind kind = ModelKind::MultiClass;
  std::string backbone;         ///< "ViT/32 224 px (12 blocks, …)"; "" for a bare layer
  std::string backbone_prefix;  ///< where the backbone's keys are in a user's state dict
  std::string backbone_preset;  ///< the preset applied to an inferred backbone
  std::string backbone_json;    ///< the backbone configuration, as JSON text ("" for none)
  std::vector<LayerSummary> layers;
  std::vector<std::string> label_names;
  std::vector<std::string> attribute_names;
  std::string provenance_json;  ///< the manifest's provenance object, as JSON text
  /// A plain nanoGPT state dict (kind Gpt, inferred): its configuration as it will run (to_json
  /// of nn::GptConfig) and where its head count comes from ("given", "model_args", "guessed":
  /// GPT-2's head width of 64, which computes another attention without error when wrong);
  /// null otherwise.
  nlohmann::json gpt_json;
  std::string gpt_heads_from;
  /// What the app guessed while opening a user's file where the weights cannot say and the guess
  /// is not the well-known case (a ViT's head count, a CLIP ViT's activation), with what to do.
  std::vector<std::string> notes;
  int64_t tensor_count = 0;
  int64_t total_parameters() const;
};

/// Loads and validates the file (no tensor data is read). Throws mumoe::FileError.
/// `overrides` give what a plain state_dict cannot tell.
ModelSummary summarize_model_file(const std::string& path, const LayoutOverrides& overrides = {});

/// The summary as a JSON document (the `mumoe info --json` contract).
std::string summary_to_json(const ModelSummary& summary, int indent = 2);
/// What kind of file it is and where its configuration came from, in one line (the Model page's
/// "Format" and `mumoe info`'s "format:"): "mumoe model file, version 1"; "PyTorch state_dict in
/// a PyTorch checkpoint file (configuration inferred from key names and shapes)"; or, for a file
/// whose configuration is in the manifest beside it, "PyTorch checkpoint file, configured by
/// model.pth.mumoe.json beside it (saved opening choices, or written by mumoe-studio)".
std::string format_description(const ModelSummary& summary);

}  // namespace mumoe::model
