// Recognising an image backbone in a plain PyTorch state dict next to a μMoE head: a timm
// VisionTransformer ("…patch_embed.proj.weight", "…blocks.{i}.attn.qkv.weight", …) or a
// torchvision ResNet ("…conv1.weight", "…layer1.0.conv1.weight", …) or the μMoE reference's
// MLP-Mixer ("…stem.1.weight", "…mixer_blocks.{i}…", "…head.2.weight"), under any prefix — the
// reference code's finetune layout nn.Sequential(timm_model, MuMoE(...)) puts them under "0."
// and the head under "1."; a ResNet whose fc was replaced has its head at "fc.".
//
// Architecture comes from key names and shapes (patch size, width, depth, image size from
// pos_embed, class token, norm_pre, fc_norm, layer scale, MLP width; ResNet blocks per stage,
// bottleneck, width per group). What they cannot tell — the number of heads (width / 64 unless
// told), the MLP activation, LayerNorm eps and the preprocessing — comes from LayoutOverrides'
// preset (default: "vit_base_patch32_clip_224.openai" for a CLIP-style ViT with norm_pre and no
// patch bias, "vit" for other ViTs, "resnet" for ResNets).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/manifest.h"
#include "model/state_dict_layout.h"
#include "nn/backbone_config.h"

namespace mumoe::model {

struct InferredBackbone {
  nn::BackboneConfig config;
  std::string prefix;       ///< "" or ends with '.': where the backbone's keys live
  std::string preset;       ///< the preset applied
  bool preset_given = false;  ///< from the overrides (else the default for this backbone)
  /// The backbone comes with a plain Linear classifier (an MLP-Mixer's head.2): then all the
  /// file's μMoE layers are the backbone's.
  std::optional<LinearHead> linear_head;
  /// What was guessed where the weights cannot say and the guess is not the well-known case
  /// ("attention heads guessed: 1 (width 64 / 64) — …"): shown once by `info` and the Model page
  /// (model_summary.h), from the manifest's provenance "notes".
  std::vector<std::string> notes;
};

/// The backbone among `shapes` (wrapper prefixes already stripped), or nothing when there is
/// none. Throws FileError(path, …) when a recognised backbone is incomplete or inconsistent, or
/// UsageError for a preset or head count that does not fit it.
std::optional<InferredBackbone> infer_backbone(const std::map<std::string, std::vector<int64_t>>& shapes,
                                               const LayoutOverrides& overrides, const std::string& path);

/// The manifest of an image classifier made of the TorchScript backbone
/// overrides.torchscript_backbone (input size overrides.image_size or 224, preprocessing from
/// overrides.backbone_preset or "imagenet") and the only μMoE layer of `head_file` (renamed
/// "head"). Throws UsageError when the file is not one bare layer, FileError for a backbone file
/// that is missing or not a regular file.
Manifest torchscript_classifier_manifest(const Manifest& head_file, const LayoutOverrides& overrides,
                                         const std::string& path);

/// The manifest of an image classifier made of an inferred backbone and the one μMoE layer of
/// `layers` whose input is the backbone's features and whose keys lie outside the backbone
/// (renamed "head", its prefix kept); nothing when `layers` has no such single head.
std::optional<Manifest> inferred_classifier_manifest(const InferredBackbone& backbone,
                                                     const std::vector<ModelLayer>& layers);

}  // namespace mumoe::model
