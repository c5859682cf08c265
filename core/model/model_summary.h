// A torch-free description of a model file: what `mumoe info` prints and the GUI shows.
//
// This header includes no LibTorch or Qt headers on purpose, so UI code can use it cheaply.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/layer_config.h"

namespace mumoe::model {

struct LayerSummary {
  std::string name;
  std::string prefix;
  nn::LayerConfig config;
  nn::ParameterCount parameters;
};

struct ModelSummary {
  std::string path;
  uint64_t file_bytes = 0;
  bool inferred = false;  ///< plain state_dict whose configuration was inferred
  std::string file_format;  ///< "safetensors" or "PyTorch checkpoint"
  int format_version = 0;
  std::string architecture;
  std::vector<LayerSummary> layers;
  std::vector<std::string> label_names;
  std::vector<std::string> attribute_names;
  std::string provenance_json;  ///< the manifest's provenance object, as JSON text
  int64_t tensor_count = 0;
  int64_t total_parameters() const;
};

/// Loads and validates the file (no tensor data is read). Throws mumoe::FileError.
/// `gate_activation` overrides what a plain state_dict cannot tell ("" = default entmax15).
ModelSummary summarize_model_file(const std::string& path, const std::string& gate_activation = "",
                                  const std::string& checkpoint_key = "");

/// The summary as a JSON document (the `mumoe info --json` contract).
std::string summary_to_json(const ModelSummary& summary, int indent = 2);

}  // namespace mumoe::model
