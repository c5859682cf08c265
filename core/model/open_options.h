// How to open a model file whose own bytes cannot say it all (a PyTorch checkpoint or a plain
// safetensors state dict: model/state_dict_layout.h), remembered beside it so that every front
// end and page opens it the same way: the GUI's Model Options dialog and `mumoe info --remember`
// both write the manifest the file opens with under those choices into its sidecar
// (model_file.h: "<path>.mumoe.json"), which ModelFile::load reads when no choice overrides it.
// Also the class-name files the choices may name.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
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
/// remembered by its absolute path; without a checkpoint key in `overrides` the one remembered
/// before is kept. Throws UsageError for a mumoe model file (it has its own
/// manifest: nothing to remember) and WriteError when the sidecar cannot be written.
std::string remember_open_options(const std::string& path, const LayoutOverrides& overrides);

/// What a sidecar remembers for the file it describes.
struct RememberedOptions {
  nlohmann::json manifest;     ///< the manifest the file opens with
  std::string checkpoint_key;  ///< the state dict of a checkpoint holding several ("" = automatic)
};
/// The sidecar of `path` when it describes the file as it is now (same byte count; a checkpoint
/// saved again since is not described); nothing when there is none. Throws FileError naming the
/// sidecar when it is not one.
std::optional<RememberedOptions> read_remembered_options(const std::string& path);

/// Removes the sidecar of `path` and returns its path; "" when there was none. Throws WriteError
/// when it exists but cannot be removed.
std::string forget_open_options(const std::string& path);

/// Class names from a file: one per line, a JSON list, or a JSON object index → name or
/// index → [id, name] (imagenet_class_index.json). Throws FileError naming the file.
std::vector<std::string> read_class_names(const std::string& path);

}  // namespace mumoe::model
