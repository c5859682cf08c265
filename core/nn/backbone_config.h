// Configuration of the image backbones an image classifier can have, and of the preprocessing
// that turns a data set's images into the backbone's inputs.
//
//   * SmallCnn ("cnn2"): the demos' two-convolution CNN; takes the data's images as they are.
//   * VisionTransformer ("vit"): timm's VisionTransformer layout (patch_embed.proj, cls_token,
//     pos_embed, norm_pre, blocks.{i}.{norm1,attn.qkv,attn.proj,norm2,mlp.fc1,mlp.fc2}, norm,
//     fc_norm), e.g. CLIP ViT-B/32 or DINO ViT-B/16 created with num_classes=0.
//   * ResNet ("resnet"): torchvision's ResNet layout (conv1, bn1, layer1…layer4 of BasicBlock or
//     Bottleneck, downsample.{0,1}), without its fc.
//   * TorchScript ("torchscript"): any backbone traced or scripted to a file (torch.jit.save) that
//     maps a normalised image batch [B, 3, S, S] to features [B, D]; its weights stay in that file.
//   * MlpMixer ("mixer"): the μMoE reference code's MLP-Mixer (experiments/mlp_mixer.py, after
//     lucidrains/mlp-mixer-pytorch): stem.1 (a Linear on P×P×C patches), mixer_blocks.{i}.0 (token
//     mixing: norm, fn.1 on the transposed stream), mixer_blocks.{i}.1 (channel mixing: norm, fn),
//     head.0 (LayerNorm) and the mean over tokens; its classifier head.2 is a plain Linear that
//     the image classifier holds (nn/image_classifier.h). Each mixing MLP is a two-layer μMoE
//     block or Linear–GELU–Linear, block by block.
//
// This header is plain C++ (no LibTorch) so that the UI can show a configuration.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "nn/layer_config.h"
#include "nn/moe_layer_config.h"

namespace mumoe::nn {

enum class BackboneKind { SmallCnn, VisionTransformer, ResNet, TorchScript, MlpMixer };

/// The transformer MLP's activation: GELU (erf) or CLIP's QuickGELU x·σ(1.702x).
enum class MlpActivation { Gelu, QuickGelu };

struct VitConfig {
  int64_t patch_size = 16;
  int64_t width = 768;   ///< embedding dimension D
  int64_t depth = 12;    ///< transformer blocks
  int64_t heads = 12;    ///< attention heads (D / heads is the head dimension)
  int64_t mlp_dim = 3072;
  bool patch_bias = true;    ///< patch_embed.proj has a bias (CLIP's does not)
  bool class_token = true;
  /// The position embedding covers the class token too (timm's default); false = timm's
  /// no_embed_class (positions only for patches, the class token added after).
  bool pos_embed_class = true;
  bool norm_pre = false;     ///< LayerNorm after the embeddings (CLIP)
  bool layer_scale = false;  ///< blocks.{i}.ls1/ls2.gamma (DINOv2, DeiT III)
  std::string pool = "token";  ///< "token" (the class token) or "avg" (mean of patch tokens)
  bool fc_norm = false;      ///< LayerNorm after pooling instead of `norm` before it
  MlpActivation activation = MlpActivation::Gelu;
  double norm_eps = 1e-6;    ///< timm's default; CLIP uses 1e-5
  /// Blocks whose MLP is a μMoE two-layer block (width → mlp_dim → width, spec §1) instead of
  /// timm's fc1/fc2, by block index: "blocks.{i}.mlp" then holds the reference layout (projs.0,
  /// MuMoE.factors.*, MuMoE2.factors.*) and the block computes x + μMoE(norm2(x)). Not written
  /// by to_json(BackboneConfig): a model file's manifest lists these as μMoE layers named
  /// "blocks.{i}.mlp" (model/classifier_file.h), the one place a layer's configuration lives.
  std::map<int64_t, LayerConfig> mumoe_mlps;
  /// Blocks whose MLP is a sparse or soft MoE layer of the router study (nn/moe_layer.h):
  /// width → (experts of hidden_dim, GELU) → width, block computes x + MoE(norm2(x)); its tensors
  /// "blocks.{i}.mlp.router", "…experts_w1" …; listed in the manifest like mumoe_mlps. Routing
  /// groups are one image's tokens (group_size = tokens per image), so an image is routed the
  /// same whatever batch it is in.
  std::map<int64_t, MoELayerConfig> router_mlps;
};

struct MixerConfig {
  int64_t patch_size = 16;
  int64_t width = 512;            ///< channels C (the features' width)
  int64_t depth = 8;              ///< mixer blocks
  int64_t token_hidden = 256;     ///< hidden width of the token-mixing MLPs (T → h → T)
  int64_t channel_hidden = 2048;  ///< hidden width of the channel-mixing MLPs (C → H → C)
  double norm_eps = 1e-5;         ///< nn.LayerNorm's default
  /// Blocks whose token-mixing MLP is a two-layer μMoE block T → token_hidden → T (its rows are
  /// the C channels of one image: a coefficient per channel), by block index; named
  /// "mixer_blocks.{i}.0.fn.1" in the manifest. Not written by to_json (as VitConfig::mumoe_mlps).
  std::map<int64_t, LayerConfig> token_mumoe;
  /// Blocks whose channel-mixing MLP is a two-layer μMoE block C → channel_hidden → C (a
  /// coefficient per patch token), "mixer_blocks.{i}.1.fn".
  std::map<int64_t, LayerConfig> channel_mumoe;
};

struct ResNetConfig {
  std::array<int64_t, 4> blocks = {2, 2, 2, 2};  ///< resnet18; resnet34/50: 3 4 6 3
  bool bottleneck = false;                       ///< resnet50 and deeper
  int64_t width_per_group = 64;                  ///< 128 for wide_resnet50_2
};

/// timm's / torchvision's eval transform: resize the shorter side (bicubic or bilinear,
/// antialiased) to floor(image_size / crop_pct), centre-crop image_size × image_size, scale to
/// [0, 1], normalise by mean and std. Grey images are repeated to three channels.
struct ImagePreprocess {
  bool enabled = false;  ///< false: the data's images must already have the backbone's shape
  double crop_pct = 0.875;
  std::string interpolation = "bicubic";  ///< "bicubic" | "bilinear"
  std::array<double, 3> mean = {0.485, 0.456, 0.406};
  std::array<double, 3> std = {0.229, 0.224, 0.225};
  /// The shorter side the image is resized to before the centre crop.
  int64_t resize_size(int64_t image_size) const;
};

struct BackboneConfig {
  BackboneKind kind = BackboneKind::SmallCnn;
  int64_t in_channels = 1;  ///< channels the backbone takes (3 for vit/resnet)
  int64_t image_size = 28;  ///< side of the square images the backbone takes
  int64_t channels1 = 32;   ///< SmallCnn only
  int64_t channels2 = 64;   ///< SmallCnn only
  /// Width of the features (the μMoE head's input I): SmallCnn's last Linear; a ViT's width; a
  /// ResNet's last stage (512 or 2048).
  int64_t feature_dim = 128;
  VitConfig vit;
  ResNetConfig resnet;
  MixerConfig mixer;
  std::string torchscript_file;  ///< TorchScript only: the archive torch.jit.save wrote
  ImagePreprocess preprocess;

  /// Throws UsageError naming the first inconsistent field.
  void validate() const;
  /// "cnn2", "vit", "resnet", "torchscript" or "mixer".
  std::string type_name() const;
  /// The side of a patch for the patch-token backbones (ViT, Mixer), else 0.
  int64_t patch_size() const;
  /// "ViT-B/32 224 px (12 blocks, width 768, QuickGELU)", "ResNet-18", "CNN 28 px".
  std::string describe() const;
};

nlohmann::json to_json(const BackboneConfig& config);
/// Throws UsageError naming the bad field.
BackboneConfig backbone_config_from_json(const nlohmann::json& json);

/// Named presets for what a state dict cannot say: the MLP activation, LayerNorm eps and the
/// preprocessing, as timm.create_model(name) builds them: "vit_base_patch32_clip_224.openai"
/// (GELU — timm's choice for these weights —, eps 1e-5, CLIP mean/std, crop_pct 0.9),
/// "vit_base_patch32_clip_quickgelu_224.openai" (the same with CLIP's native QuickGELU),
/// "vit_base_patch16_224.dino" (GELU, eps 1e-6, ImageNet mean/std, crop 0.9), "vit" (timm's
/// default: GELU, eps 1e-6, mean/std 0.5, crop 0.9), "resnet" (torchvision: bilinear, 256 →
/// 224, ImageNet mean/std), "mixer" (the μMoE reference's MLP-Mixer test transform: Resize(256),
/// torchvision's default bilinear, antialiased; centre crop 224; ImageNet mean/std), "imagenet" (timm's default: bicubic, crop 0.875, ImageNet mean/std;
/// for TorchScript backbones, which take every preset's preprocessing and nothing else).
/// Applying a preset keeps what the weights determine.
std::vector<std::string> backbone_preset_names();
/// Throws UsageError listing the presets for an unknown name, or when the preset is for another
/// kind of backbone than `config`.
void apply_backbone_preset(BackboneConfig& config, const std::string& preset);

/// A μMoE two-layer block that replaces a transformer MLP width → hidden → width: CP with
/// `cp_rank`, one expert mode of `experts`, LayerNorm gating, an input LayerNorm and a bias row
/// (the reference's MuMoE(..., apply_ln=True, normalization='ln'), as in the project's GPT).
LayerConfig mumoe_mlp_config(int64_t width, int64_t hidden, int64_t experts, int64_t cp_rank,
                             GateActivationKind activation = GateActivationKind::Entmax15);
/// A μMoE two-layer block as an MLP-Mixer's mixing MLP outer → hidden → outer, as the reference's
/// MuMoE(CPMuMoE, …, second_dim=outer) with its defaults: CP with `cp_rank`, one expert mode,
/// BatchNorm gating (normalization='bn'), no input LayerNorm, a bias row.
LayerConfig mixer_mumoe_config(int64_t outer, int64_t hidden, int64_t experts, int64_t cp_rank,
                               GateActivationKind activation = GateActivationKind::Entmax15);
/// The CP rank whose μMoE block has no more parameters than the dense MLP it replaces
/// (2·width·hidden weights + biases), as the paper's parameter-matched models; at least 1.
int64_t parameter_matched_cp_rank(int64_t width, int64_t hidden, int64_t experts);
/// The same block factorised as a tensor ring with `tr_ranks` (3 ring ranks; the reference's
/// TRμMoE GPT uses {4, 4, r}).
LayerConfig mumoe_tr_mlp_config(int64_t width, int64_t hidden, int64_t experts, std::vector<int64_t> tr_ranks,
                                GateActivationKind activation = GateActivationKind::Entmax15);
/// Ring ranks {4, 4, r} with the largest r whose TR block (count_parameters) has no more
/// parameters than the dense MLP; throws UsageError when even r = 1 has more.
std::vector<int64_t> parameter_matched_tr_ranks(int64_t width, int64_t hidden, int64_t experts);
/// A router-study MoE layer that replaces a transformer MLP width → hidden → width: `experts`
/// GELU MLPs of `expert_hidden` each, routing groups of `tokens` (one image), k = 1, capacity
/// factor 1, one slot per expert for Soft MoE.
MoELayerConfig router_mlp_config(RouterKind router, int64_t width, int64_t experts, int64_t expert_hidden,
                                 int64_t tokens);
/// The expert hidden width whose router MLP has no more parameters than the dense MLP it
/// replaces (router I·n + n experts of I·H + H + H·I + I); throws UsageError when even H = 1
/// does not fit (too many experts for the dense MLP's parameters).
int64_t parameter_matched_expert_hidden(int64_t width, int64_t hidden, int64_t experts);

std::string to_string(MlpActivation activation);
MlpActivation parse_mlp_activation(const std::string& text);  ///< "gelu" | "quick_gelu"

}  // namespace mumoe::nn
