// Recognising μMoE layers in a plain PyTorch state_dict saved as safetensors (spec §2).
//
// Works from tensor names and shapes only: strips DataParallel ("module.") and torch.compile
// ("_orig_mod.") prefixes, finds every μMoE wrapper by its gating weights "…projs.0", and infers
// CP vs TR, expert counts, ranks, hierarchy, bias, BatchNorm vs LayerNorm gating, input LayerNorm
// and the two-layer block. What names and shapes cannot tell (the gate activation, LayerNorm vs
// no gate normalisation, label names) comes from LayoutOverrides.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/manifest.h"

namespace mumoe::model {

struct LayoutOverrides {
  std::optional<nn::GateActivationKind> gate_activation;  ///< default entmax15
  /// Used when the checkpoint has no BatchNorm buffers (default: LayerNorm, the reference's
  /// only other choice).
  std::optional<nn::GateNorm> gate_norm_without_bn;
  std::vector<std::string> label_names;
  /// Which state dict of a PyTorch checkpoint holding several ("model", "state_dict", …);
  /// "" = the only one.
  std::string checkpoint_key;
  /// For a ViT or ResNet backbone (model/backbone_layout.h): what its weights cannot say — MLP
  /// activation, LayerNorm eps, preprocessing ("" = the default for the backbone found).
  std::string backbone_preset;
  /// A ViT's attention heads (0 = width / 64).
  int64_t vit_heads = 0;
  /// A TorchScript backbone (torch.jit.save) in front of the file's only μMoE layer, which becomes
  /// the head of an image classifier (model/backbone_layout.h).
  std::string torchscript_backbone;
  /// The backbone's input size for a ResNet or TorchScript backbone (0 = 224); a ViT's comes
  /// from its position embedding.
  int64_t image_size = 0;
};

/// True when a state-dict key ends with `suffix` ("blocks.0.attn.qkv.weight", ".weight").
inline bool ends_with(const std::string& key, const std::string& suffix) {
  return key.size() >= suffix.size() && key.compare(key.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// "module._orig_mod.head.projs.0" → "head.projs.0".
std::string strip_wrapper_prefixes(const std::string& key);

/// True for nanoGPT's key layout (normalised keys): transformer.h.0.ln_1.weight beside
/// transformer.wte.weight or lm_head.weight — a GPT whatever its MLPs are, μMoE or plain.
bool is_nanogpt_layout(const std::vector<std::string>& keys);

/// Infers every μMoE layer from normalised key → shape. Throws FileError(path, …) when a layer is
/// incomplete or inconsistent, or when the file holds no μMoE layer at all.
std::vector<ModelLayer> infer_layers(const std::map<std::string, std::vector<int64_t>>& shapes,
                                     const LayoutOverrides& overrides, const std::string& path);

/// The file key of a block's own parameter/buffer key ("MuMoE.factors.0") for `layer`.
std::string file_key(const ModelLayer& layer, const std::string& module_key);

}  // namespace mumoe::model

namespace mumoe::model {

/// Every tensor a block with `config` has, by its module key ("projs.0", "bn.0.running_mean",
/// "MuMoE.factors.0", …), with its shape. BatchNorm's num_batches_tracked is listed with shape
/// {} and is optional in files.
std::map<std::string, std::vector<int64_t>> expected_shapes(const nn::LayerConfig& config);

}  // namespace mumoe::model
