// How to open a model file whose own bytes cannot say it all (a PyTorch checkpoint or a plain
// safetensors state dict: model/state_dict_layout.h), remembered beside it so that every front
// end and page opens it the same way: the GUI's Model Options dialog and `mumoe info --remember`
// both write the manifest the file opens with under those choices into its sidecar
// (model_file.h: "<path>.mumoe.json"), which ModelFile::load reads when no choice overrides it.
// Also the class-name files the choices may name.
#pragma once

#include <string>
#include <vector>

#include "model/state_dict_layout.h"

namespace mumoe::model {

/// True when `overrides` choose how the layers or the backbone are inferred (gate activation or
/// normalisation, checkpoint key, backbone preset, ViT heads, image size): ModelFile::load then
/// infers afresh instead of reading a remembered sidecar.
bool chooses_layout(const LayoutOverrides& overrides);

/// Opens `path` with `overrides` (throws what ModelFile::load throws) and writes the resulting
/// manifest to its sidecar, atomically; returns the sidecar's path. A TorchScript backbone is
/// remembered by its absolute path. Throws UsageError for a mumoe model file (it has its own
/// manifest: nothing to remember) and WriteError when the sidecar cannot be written.
std::string remember_open_options(const std::string& path, const LayoutOverrides& overrides);

/// Removes the sidecar of `path` and returns its path; "" when there was none. Throws WriteError
/// when it exists but cannot be removed.
std::string forget_open_options(const std::string& path);

/// Class names from a file: one per line, a JSON list, or a JSON object index → name or
/// index → [id, name] (imagenet_class_index.json). Throws FileError naming the file.
std::vector<std::string> read_class_names(const std::string& path);

}  // namespace mumoe::model
