// Options shared by commands that load a model: what a plain state_dict cannot tell.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "model/state_dict_layout.h"

namespace mumoe::cli {

struct ModelOptions {
  std::string model;
  std::string activation;  ///< entmax15 | softmax
  std::string gate_norm;   ///< for checkpoints without BatchNorm buffers: layernorm | none
  std::string labels;      ///< comma-separated output names
  std::string key;         ///< the state dict inside a PyTorch checkpoint holding several

  void add_to(CLI::App* app);
  model::LayoutOverrides overrides() const;
};

}  // namespace mumoe::cli
