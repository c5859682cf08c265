// Loading and saving μMoE model files.
//
// A mumoe model file is ONE safetensors file: the tensors in the reference implementation's key
// layout (spec §2) under each layer's prefix, and a JSON manifest in "__metadata__" under
// "mumoe.manifest". A plain state_dict written by PyTorch users
// (safetensors.torch.save_file(model.state_dict(), path)) loads too, and so does one written by
// torch.save (a .pth/.pt checkpoint, io/pytorch_checkpoint.h; LayoutOverrides::checkpoint_key
// picks the state dict when it holds several): their layers are inferred from key names and
// shapes (state_dict_layout.h), and a timm ViT or torchvision ResNet next to a single μMoE head
// makes it an image classifier (backbone_layout.h).
//
// load() validates the file header, the manifest, and that every layer's tensors exist with the
// right shapes before any tensor data is read; build_layer() reads only that layer's tensors and
// rejects non-float parameters and NaN/inf values, naming the tensor.
#pragma once

#include <torch/types.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "io/tensor_archive.h"
#include "model/manifest.h"
#include "model/state_dict_layout.h"
#include "nn/moe_layer.h"
#include "nn/mumoe_block.h"

namespace mumoe::model {

class ModelFile {
 public:
  /// Throws FileError naming the file and the problem.
  static ModelFile load(const std::string& path, const LayoutOverrides& overrides = {});

  const std::string& path() const { return file_->path(); }
  /// The file's format: "safetensors" or "PyTorch checkpoint".
  std::string format_name() const { return file_->format_name(); }
  /// The top-level key of a PyTorch checkpoint under which the state dict was found ("" = the
  /// whole file).
  std::string state_dict_key() const { return file_->state_dict_key(); }
  /// The plain values saved beside the state dict (io::TensorArchive::side_values): nanoGPT's
  /// "model_args", a training script's "epoch"; an empty object for a safetensors file.
  nlohmann::json side_values() const { return file_->side_values(); }
  const Manifest& manifest() const { return manifest_; }
  /// True when the file had no manifest and the layers were inferred from a plain state_dict.
  bool inferred() const { return inferred_; }
  /// True when the configuration came from the manifest beside the file (manifest_sidecar_path):
  /// a user's file whose opening choices were saved (Model Options, `info --remember`), or a
  /// PyTorch checkpoint this program wrote. The file itself is then not a mumoe model file.
  bool manifest_beside() const { return manifest_beside_; }

  /// The layer called `name`; throws UsageError listing the available names.
  const ModelLayer& layer(const std::string& name) const;
  /// The only layer; throws UsageError (listing names) when the model has several.
  const ModelLayer& single_layer() const;

  /// Builds the layer's module in eval mode with its weights, as `dtype` on the CPU. Throws
  /// UsageError for a router layer (ModelLayer::is_router), which build_router_layer builds.
  nn::MuMoEBlock build_layer(const std::string& name, torch::Dtype dtype = torch::kFloat32) const;
  nn::MoELayer build_router_layer(const std::string& name, torch::Dtype dtype = torch::kFloat32) const;

  /// Copies the file's tensors into every parameter and buffer of `module`; `file_key_of` maps
  /// a module key to a (prefix-stripped) file key. Missing or mis-shaped tensors, non-float
  /// parameters and NaN/inf values are errors naming the tensor; BatchNorm's
  /// num_batches_tracked is optional.
  void load_into(torch::nn::Module& module,
                 const std::function<std::string(const std::string&)>& file_key_of) const;

  /// Every tensor name in the file after prefix stripping.
  std::vector<std::string> tensor_names() const;
  /// The name a (prefix-stripped) tensor has in the file ("module.0.cls_token").
  std::string original_name(const std::string& name) const;
  /// Reads one tensor by its (prefix-stripped) name.
  torch::Tensor read_tensor(const std::string& name) const;

 private:
  explicit ModelFile(std::shared_ptr<const io::TensorArchive> file) : file_(std::move(file)) {}
  void check_layer_shapes(const ModelLayer& layer) const;

  std::shared_ptr<const io::TensorArchive> file_;
  std::map<std::string, std::string> original_name_;  ///< stripped name → name in the file
  Manifest manifest_;
  bool inferred_ = false;
  bool manifest_beside_ = false;
};

/// Where the manifest of a PyTorch checkpoint written by this program lives: "<path>.mumoe.json"
/// (a checkpoint has no metadata of its own): {"manifest": …, "model_file_bytes": N} and, for a
/// checkpoint holding several state dicts, "checkpoint_key". load() reads it when the file has no
/// manifest of its own and still has N bytes (a checkpoint re-saved since is inferred afresh).
std::string manifest_sidecar_path(const std::string& model_path);
/// Writes the sidecar of `model_path` (which must exist) atomically, with the state dict's key
/// in the checkpoint when it was chosen ("" = none). Throws WriteError.
void write_manifest_sidecar(const std::string& model_path, const Manifest& manifest,
                            const std::string& checkpoint_key = "");

/// The tensors of one block under `layer.prefix`, in the reference key layout (parameters and
/// buffers, including num_batches_tracked as I64).
std::vector<io::NamedTensor> layer_tensors(const ModelLayer& layer, const nn::MuMoEBlock& block);
/// The tensors of a router layer under `layer.prefix` (its parameters' names).
std::vector<io::NamedTensor> layer_tensors(const ModelLayer& layer, const nn::MoELayer& moe);

/// Writes tensors and the manifest atomically (temp file + rename).
void save_model_file(const std::string& path, const Manifest& manifest,
                     const std::vector<io::NamedTensor>& tensors,
                     const io::WriteProgress& progress = {});

}  // namespace mumoe::model
