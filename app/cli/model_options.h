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
  std::string class_names; ///< a file of output names (one per line, or JSON)
  std::string key;         ///< the state dict inside a PyTorch checkpoint holding several
  std::string preset;      ///< backbone preset (model/backbone_layout.h)
  int64_t heads = 0;       ///< a ViT's or plain GPT state dict's attention heads (0 = default)
  std::string tokenizer;   ///< a GPT's tokenizer: byte, gpt2 or DIR ("" = the model's own)
  std::string backbone;    ///< a TorchScript backbone in front of MODEL (a μMoE head)
  int64_t image_size = 0;  ///< a ResNet's or TorchScript backbone's input size (0 = 224)

  void add_to(CLI::App* app);
  model::LayoutOverrides overrides() const;
};

}  // namespace mumoe::cli
