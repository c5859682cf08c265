#include "model/backbone_layout.h"

#include <cmath>
#include <set>
#include <tuple>

#include <filesystem>

#include "io/errors.h"
#include "io/file_checks.h"
#include "model/classifier_file.h"
#include "model/state_dict_layout.h"

namespace mumoe::model {
namespace {

using ShapeMap = std::map<std::string, std::vector<int64_t>>;

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// The prefix of the first key ending in `suffix` ("0." for "0.patch_embed.proj.weight").
std::optional<std::string> prefix_of(const ShapeMap& shapes, const std::string& suffix) {
  for (const auto& [key, shape] : shapes)
    if (ends_with(key, suffix)) {
      const auto prefix = key.substr(0, key.size() - suffix.size());
      if (prefix.empty() || prefix.back() == '.') return prefix;
    }
  return std::nullopt;
}

int64_t count_numbered(const ShapeMap& shapes, const std::string& before, const std::string& after) {
  int64_t n = 0;
  while (shapes.count(before + std::to_string(n) + after)) ++n;
  return n;
}

class Reader {
 public:
  Reader(const ShapeMap& shapes, std::string prefix, std::string path, std::string what)
      : shapes_(shapes), prefix_(std::move(prefix)), path_(std::move(path)), what_(std::move(what)) {}
  bool has(const std::string& key) const { return shapes_.count(prefix_ + key) > 0; }
  const std::vector<int64_t>& shape(const std::string& key, size_t dims) const {
    auto it = shapes_.find(prefix_ + key);
    if (it == shapes_.end()) fail("tensor '" + prefix_ + key + "' is missing");
    if (it->second.size() != dims)
      fail("tensor '" + prefix_ + key + "' has " + std::to_string(it->second.size()) + " dimensions, expected " +
           std::to_string(dims));
    return it->second;
  }
  [[noreturn]] void fail(const std::string& message) const {
    throw FileError(path_, what_ + (prefix_.empty() ? "" : " under '" + prefix_ + "'") + ": " + message);
  }
  int64_t count(const std::string& before, const std::string& after) const {
    return count_numbered(shapes_, prefix_ + before, after);
  }

 private:
  const ShapeMap& shapes_;
  std::string prefix_, path_, what_;
};

int64_t exact_sqrt(int64_t n) {
  const auto r = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(n))));
  return r * r == n ? r : -1;
}

// The inferred backbone `b` at `prefix` under its preset: the one the user named
// (overrides.backbone_preset), else `inferred` ("" = none: the weights' own settings).
InferredBackbone under_preset(nn::BackboneConfig b, const std::string& prefix, const LayoutOverrides& overrides,
                              const std::string& inferred) {
  InferredBackbone out;
  out.prefix = prefix;
  out.preset_given = !overrides.backbone_preset.empty();
  out.preset = out.preset_given ? overrides.backbone_preset : inferred;
  if (!out.preset.empty()) nn::apply_backbone_preset(b, out.preset);
  out.config = b;
  return out;
}

InferredBackbone infer_vit(const ShapeMap& shapes, const std::string& prefix, const LayoutOverrides& overrides,
                           const std::string& path) {
  const Reader r(shapes, prefix, path, "timm ViT");
  nn::BackboneConfig b;
  b.kind = nn::BackboneKind::VisionTransformer;
  auto& v = b.vit;
  const auto& proj = r.shape("patch_embed.proj.weight", 4);
  if (proj[2] != proj[3]) r.fail("non-square patches are not supported");
  v.width = proj[0];
  b.feature_dim = v.width;
  b.in_channels = proj[1];
  v.patch_size = proj[2];
  v.patch_bias = r.has("patch_embed.proj.bias");
  v.depth = r.count("blocks.", ".norm1.weight");
  if (v.depth == 0) r.fail("no transformer blocks (blocks.0.norm1.weight)");
  const auto& qkv = r.shape("blocks.0.attn.qkv.weight", 2);
  if (qkv[0] != 3 * v.width || qkv[1] != v.width)
    r.fail("blocks.0.attn.qkv.weight has shape [" + std::to_string(qkv[0]) + ", " + std::to_string(qkv[1]) +
           "], expected [3·width, width] with width " + std::to_string(v.width));
  // Each block's MLP is timm's fc1/fc2 or a μMoE two-layer block ("blocks.{i}.mlp.projs.0").
  std::vector<ModelLayer> layers;
  v.mlp_dim = 0;
  for (int64_t i = 0; i < v.depth; ++i) {
    const auto mlp = "blocks." + std::to_string(i) + ".mlp.";
    if (r.has(mlp + "fc1.weight")) {
      v.mlp_dim = r.shape(mlp + "fc1.weight", 2)[0];
      continue;
    }
    if (!r.has(mlp + "projs.0")) r.fail("block " + std::to_string(i) + " has neither mlp.fc1 nor a μMoE mlp (mlp.projs.0)");
    if (layers.empty()) layers = infer_layers(shapes, overrides, path);
    const ModelLayer* found = nullptr;
    for (const auto& layer : layers)
      if (layer.prefix == prefix + mlp) found = &layer;
    if (!found || found->legacy_factor_keys || !found->config.is_block() || found->config.input_dim != v.width ||
        found->config.final_output_dim() != v.width)
      r.fail("the μMoE MLP of block " + std::to_string(i) + " is not a two-layer μMoE block " +
             std::to_string(v.width) + " → hidden → " + std::to_string(v.width) + " (MuMoE and MuMoE2 factors)");
    v.mumoe_mlps[i] = found->config;
    if (v.mlp_dim == 0) v.mlp_dim = found->config.output_dim;
  }
  // Heads cannot be seen in the weights: a head dimension of 64, except for the widths whose
  // standard models use 16 heads of another size (ViT-H 1280, ViT-g 1408, ViT-G 1664).
  const std::map<int64_t, int64_t> sixteen_heads = {{1280, 16}, {1408, 16}, {1664, 16}};
  // The widths of timm's and CLIP's standard ViTs (Ti, S, B, L, and the sixteen-head ones), whose
  // heads are known: any other width's count is a guess worth saying.
  const std::set<int64_t> standard_widths = {192, 384, 512, 768, 1024, 1280, 1408, 1664};
  std::vector<std::string> notes;
  if (overrides.vit_heads > 0) {
    v.heads = overrides.vit_heads;
  } else if (sixteen_heads.count(v.width)) {
    v.heads = sixteen_heads.at(v.width);
  } else if (v.width % 64 == 0) {
    v.heads = v.width / 64;
    if (!standard_widths.count(v.width))
      notes.push_back("attention heads guessed: " + std::to_string(v.heads) + " (width " + std::to_string(v.width) +
                      " / a head width of 64) — if the model has another count, pass --heads N (GUI: Model Options)");
  } else {
    throw UsageError(path + ": the ViT's width " + std::to_string(v.width) +
                     " is not a multiple of 64; give its number of attention heads with --heads");
  }
  if (v.width % v.heads != 0)
    throw UsageError(path + ": the ViT's width " + std::to_string(v.width) + " is not divisible by " +
                     std::to_string(v.heads) + " heads");
  v.class_token = r.has("cls_token");
  v.norm_pre = r.has("norm_pre.weight");
  v.layer_scale = r.has("blocks.0.ls1.gamma");
  v.fc_norm = r.has("fc_norm.weight");
  // timm: fc_norm is used with global average pooling (use_fc_norm defaults to global_pool == 'avg').
  v.pool = v.fc_norm || !v.class_token ? "avg" : "token";
  if (r.has("reg_token")) r.fail("register tokens (reg_token) are not supported");
  const auto& pos = r.shape("pos_embed", 3);
  if (pos[2] != v.width) r.fail("pos_embed's width " + std::to_string(pos[2]) + " differs from the patch embedding's");
  int64_t grid = -1;
  if (v.class_token && exact_sqrt(pos[1] - 1) > 0) {
    grid = exact_sqrt(pos[1] - 1);
  } else if (exact_sqrt(pos[1]) > 0) {
    grid = exact_sqrt(pos[1]);
    v.pos_embed_class = false;
  }
  if (grid <= 0) r.fail("pos_embed has " + std::to_string(pos[1]) + " positions, not a square grid of patches");
  b.image_size = grid * v.patch_size;
  if (overrides.image_size > 0 && overrides.image_size != b.image_size)
    throw UsageError(path + ": the ViT's position embedding fixes its input at " + std::to_string(b.image_size) +
                     " px, not " + std::to_string(overrides.image_size));

  if (b.in_channels != 3) r.fail("the patch embedding takes " + std::to_string(b.in_channels) + " channels, not RGB");
  const bool clip = v.norm_pre && !v.patch_bias;
  auto out = under_preset(b, prefix, overrides, clip ? "vit_base_patch32_clip_224.openai" : "vit");
  if (!out.preset_given && clip)
    notes.push_back("a CLIP-style ViT: GELU, as timm builds these weights; open_clip models use QuickGELU — pass "
                    "--preset vit_base_patch32_clip_quickgelu_224.openai (GUI: Model Options) for those");
  out.notes = std::move(notes);
  return out;
}

InferredBackbone infer_resnet(const ShapeMap& shapes, const std::string& prefix, const LayoutOverrides& overrides,
                              const std::string& path) {
  const Reader r(shapes, prefix, path, "torchvision ResNet");
  nn::BackboneConfig b;
  b.kind = nn::BackboneKind::ResNet;
  const auto& conv1 = r.shape("conv1.weight", 4);
  if (conv1[0] != 64 || conv1[2] != 7) r.fail("conv1 is not torchvision's 7×7 stem with 64 channels");
  b.in_channels = conv1[1];
  if (b.in_channels != 3) r.fail("conv1 takes " + std::to_string(b.in_channels) + " channels, not RGB");
  r.shape("bn1.running_mean", 1);
  auto& c = b.resnet;
  c.bottleneck = r.has("layer1.0.conv3.weight");
  for (int stage = 0; stage < 4; ++stage) {
    c.blocks[stage] = r.count("layer" + std::to_string(stage + 1) + ".", ".conv1.weight");
    if (c.blocks[stage] == 0) r.fail("stage layer" + std::to_string(stage + 1) + " has no blocks");
  }
  if (c.bottleneck) c.width_per_group = r.shape("layer1.0.conv1.weight", 4)[0];
  b.feature_dim = c.bottleneck ? 2048 : 512;
  b.image_size = overrides.image_size > 0 ? overrides.image_size : 224;
  return under_preset(b, prefix, overrides, "resnet");
}

// The reference MLP-Mixer (nn/mlp_mixer.h). Width from stem.1; depth by counting blocks; each
// mixing MLP a μMoE block (…projs.0) or Linear "0"/"3"; tokens T from the token-mixing MLPs (a
// square grid), the patch side and channels from stem.1's P·P·C inputs (C is 3 or 1: 3·P² is
// never a square, so the two cannot be confused); the Linear head at head.2.
InferredBackbone infer_mixer(const ShapeMap& shapes, const std::string& prefix, const LayoutOverrides& overrides,
                             const std::string& path) {
  const Reader r(shapes, prefix, path, "MLP-Mixer");
  nn::BackboneConfig b;
  b.kind = nn::BackboneKind::MlpMixer;
  auto& m = b.mixer;
  const auto& stem = r.shape("stem.1.weight", 2);
  m.width = stem[0];
  b.feature_dim = m.width;
  r.shape("stem.1.bias", 1);
  m.depth = r.count("mixer_blocks.", ".0.norm.weight");
  if (m.depth == 0) r.fail("no mixer blocks (mixer_blocks.0.0.norm.weight)");
  std::vector<ModelLayer> layers;
  int64_t tokens = 0;
  std::optional<int64_t> token_hidden, channel_hidden;
  // One mixing MLP at `at` whose outer width is `outer` (0: not known yet, learn it); returns the
  // hidden width of a plain MLP, or nothing for a μMoE block (stored in `mumoe`).
  auto read_mixing = [&](const std::string& at, int64_t& outer, std::map<int64_t, nn::LayerConfig>& mumoe, int64_t block,
                         const std::string& what) -> std::optional<int64_t> {
    if (r.has(at + "projs.0")) {
      if (layers.empty()) layers = infer_layers(shapes, overrides, path);
      const ModelLayer* found = nullptr;
      for (const auto& layer : layers)
        if (layer.prefix == prefix + at) found = &layer;
      if (!found || found->legacy_factor_keys || !found->config.is_block() ||
          found->config.input_dim != found->config.final_output_dim() || (outer && found->config.input_dim != outer))
        r.fail("the " + what + " μMoE of block " + std::to_string(block) + " (" + prefix + at +
               ") is not a two-layer μMoE block " + (outer ? std::to_string(outer) : std::string("n")) + " → hidden → " +
               (outer ? std::to_string(outer) : std::string("n")));
      outer = found->config.input_dim;
      mumoe[block] = found->config;
      return std::nullopt;
    }
    if (!r.has(at + "0.weight"))
      r.fail("block " + std::to_string(block) + "'s " + what + " MLP is neither a μMoE block (" + at +
             "projs.0) nor Linear–GELU–Linear (" + at + "0.weight)");
    const auto& fc1 = r.shape(at + "0.weight", 2);
    const auto& fc2 = r.shape(at + "3.weight", 2);
    if ((outer && fc1[1] != outer) || fc2[0] != fc1[1] || fc2[1] != fc1[0])
      r.fail("block " + std::to_string(block) + "'s " + what + " MLP " + at + "0/3 does not map " +
             std::to_string(outer ? outer : fc1[1]) + " → hidden → the same width");
    outer = fc1[1];
    return fc1[0];
  };
  for (int64_t i = 0; i < m.depth; ++i) {
    const auto block = "mixer_blocks." + std::to_string(i) + ".";
    for (const auto* norm : {".0.norm.weight", ".1.norm.weight"})
      if (r.shape("mixer_blocks." + std::to_string(i) + norm, 1)[0] != m.width)
        r.fail("mixer_blocks." + std::to_string(i) + norm + " is not of the width " + std::to_string(m.width));
    const auto token = read_mixing(block + "0.fn.1.", tokens, m.token_mumoe, i, "token-mixing");
    int64_t width = m.width;
    const auto channel = read_mixing(block + "1.fn.", width, m.channel_mumoe, i, "channel-mixing");
    // Plain MLPs of one kind share their hidden width (the reference builds them alike).
    for (auto [hidden, seen, what] : {std::tuple{token, &token_hidden, "token"}, std::tuple{channel, &channel_hidden, "channel"}}) {
      if (!hidden) continue;
      if (*seen && **seen != *hidden)
        r.fail(std::string("the plain ") + what + "-mixing MLPs have different hidden widths (" +
               std::to_string(**seen) + " and " + std::to_string(*hidden) + ")");
      *seen = hidden;
    }
  }
  m.token_hidden = token_hidden.value_or(m.token_mumoe.empty() ? 1 : m.token_mumoe.begin()->second.output_dim);
  m.channel_hidden = channel_hidden.value_or(m.channel_mumoe.empty() ? 1 : m.channel_mumoe.begin()->second.output_dim);
  const int64_t grid = exact_sqrt(tokens);
  if (grid <= 0) r.fail("the token-mixing MLPs mix " + std::to_string(tokens) + " tokens, not a square grid of patches");
  const int64_t patch_inputs = stem[1];
  if (patch_inputs % 3 == 0 && exact_sqrt(patch_inputs / 3) > 0) {
    b.in_channels = 3;
  } else if (exact_sqrt(patch_inputs) > 0) {
    b.in_channels = 1;
  } else {
    r.fail("stem.1 takes " + std::to_string(patch_inputs) + " inputs per patch, not P·P·3 or P·P");
  }
  m.patch_size = exact_sqrt(patch_inputs / b.in_channels);
  b.image_size = grid * m.patch_size;
  if (overrides.image_size > 0 && overrides.image_size != b.image_size)
    throw UsageError(path + ": the Mixer's token-mixing MLPs fix its input at " + std::to_string(b.image_size) +
                     " px, not " + std::to_string(overrides.image_size));
  if (r.shape("head.0.weight", 1)[0] != m.width) r.fail("head.0 (the final LayerNorm) is not of the width " + std::to_string(m.width));
  const auto& head = r.shape("head.2.weight", 2);
  if (head[1] != m.width || r.shape("head.2.bias", 1)[0] != head[0])
    r.fail("head.2 (the Linear classifier) does not take the width " + std::to_string(m.width));

  // Grey Mixers (this project's Fashion-MNIST demo) take the data's images as they are.
  auto out = under_preset(b, prefix, overrides, b.in_channels == 3 ? "mixer" : "");
  out.config.validate();
  out.linear_head = LinearHead{prefix + "head.2.", head[0]};
  return out;
}

}  // namespace

std::optional<InferredBackbone> infer_backbone(const ShapeMap& shapes, const LayoutOverrides& overrides,
                                               const std::string& path) {
  // Without a flag asking for a backbone, a layout that is only partly recognised (a CIFAR-style
  // 3×3 stem, register tokens, …) is no backbone: the file opens as its bare μMoE layers.
  const bool asked = !overrides.backbone_preset.empty() || overrides.vit_heads > 0;
  std::optional<InferredBackbone> found;
  // The reference MLP-Mixer's names are its own: a Mixer that does not read is an error, not a
  // file of bare layers.
  if (auto mixer = prefix_of(shapes, "stem.1.weight"); mixer && shapes.count(*mixer + "mixer_blocks.0.0.norm.weight")) {
    found = infer_mixer(shapes, *mixer, overrides, path);
    if (!overrides.torchscript_backbone.empty())
      throw UsageError(path + " has its own " + found->config.describe() + " backbone; --backbone is for a bare head");
    return found;
  }
  try {
    if (auto prefix = prefix_of(shapes, "patch_embed.proj.weight")) {
      found = infer_vit(shapes, *prefix, overrides, path);
    } else if (auto resnet = prefix_of(shapes, "layer1.0.conv1.weight");
               resnet && shapes.count(*resnet + "conv1.weight")) {
      found = infer_resnet(shapes, *resnet, overrides, path);
    }
  } catch (const FileError&) {
    if (asked) throw;
    return std::nullopt;
  }
  if (!found && !overrides.backbone_preset.empty() && overrides.torchscript_backbone.empty())
    throw UsageError(path + " has no ViT or ResNet backbone for the preset '" + overrides.backbone_preset + "'");
  // --heads is also a plain nanoGPT state dict's head count (model/gpt_file.h): not for a backbone.
  const bool gpt = shapes.count("transformer.wte.weight") || shapes.count("lm_head.weight");
  if (!found && overrides.vit_heads > 0 && !gpt) throw UsageError(path + " has no ViT backbone for --heads");
  if (found && !overrides.torchscript_backbone.empty())
    throw UsageError(path + " has its own " + found->config.describe() + " backbone; --backbone is for a bare head");
  return found;
}

Manifest torchscript_classifier_manifest(const Manifest& head_file, const LayoutOverrides& overrides,
                                         const std::string& path) {
  if (head_file.architecture != "mumoe-layers" || head_file.layers.size() != 1)
    throw UsageError("--backbone needs a head file holding one μMoE layer; " + path + " is a '" +
                     head_file.architecture + "' model with " + std::to_string(head_file.layers.size()) + " layer(s)");
  const auto& file = overrides.torchscript_backbone;
  io::require_regular_file(file);
  nn::BackboneConfig b;
  b.kind = nn::BackboneKind::TorchScript;
  b.torchscript_file = std::filesystem::absolute(file).lexically_normal().string();
  b.in_channels = 3;
  b.image_size = overrides.image_size > 0 ? overrides.image_size : 224;
  b.feature_dim = head_file.layers.front().config.input_dim;
  const auto preset = overrides.backbone_preset.empty() ? std::string("imagenet") : overrides.backbone_preset;
  nn::apply_backbone_preset(b, preset);
  Manifest m = head_file;
  m.architecture = kImageClassifierArchitecture;
  m.architecture_config = {{"backbone", nn::to_json(b)}, {"backbone_prefix", ""}, {"backbone_preset", preset}};
  m.layers.front().name = "head";
  return m;
}

std::optional<Manifest> inferred_classifier_manifest(const InferredBackbone& backbone,
                                                     const std::vector<ModelLayer>& layers) {
  if (backbone.linear_head) {  // every expert layer is the backbone's
    Manifest m;
    m.architecture = kImageClassifierArchitecture;
    m.architecture_config = {{"backbone", nn::to_json(backbone.config)},
                             {"backbone_prefix", backbone.prefix},
                             {"backbone_preset", backbone.preset},
                             {"linear_head", {{"prefix", backbone.linear_head->prefix}, {"classes", backbone.linear_head->classes}}}};
    m.layers = backbone_layers(backbone.config, backbone.prefix);
    m.provenance = {{"source", "PyTorch state_dict; backbone and head inferred from key names and shapes"},
                    {"backbone_preset", backbone.preset},
                    {"backbone_preset_given", backbone.preset_given}};
    if (!backbone.notes.empty()) m.provenance["notes"] = backbone.notes;
    return m;
  }
  std::vector<const ModelLayer*> heads;
  const auto& mlps = backbone.config.vit.mumoe_mlps;
  for (const auto& layer : layers) {
    // A ResNet at the top level owns "fc." only if a μMoE layer is there; a ViT's blocks never
    // hold the head (their μMoE MLPs are part of the backbone).
    const bool inside = !backbone.prefix.empty() && starts_with(layer.prefix, backbone.prefix);
    bool block_mlp = false;
    for (const auto& entry : mlps)
      block_mlp = block_mlp || layer.prefix == backbone.prefix + vit_mlp_layer_name(entry.first) + ".";
    if (!inside && !block_mlp && layer.config.input_dim == backbone.config.feature_dim) heads.push_back(&layer);
  }
  if (heads.size() != 1) return std::nullopt;
  Manifest m;
  m.architecture = kImageClassifierArchitecture;
  m.architecture_config = {{"backbone", nn::to_json(backbone.config)},
                           {"backbone_prefix", backbone.prefix},
                           {"backbone_preset", backbone.preset}};
  ModelLayer head = *heads.front();
  head.name = "head";
  m.layers = {head};
  for (const auto& [block, config] : mlps)
    m.layers.push_back({vit_mlp_layer_name(block), backbone.prefix + vit_mlp_layer_name(block) + ".", config, false, std::nullopt});
  m.provenance = {{"source", "PyTorch state_dict; backbone and head inferred from key names and shapes"},
                  {"backbone_preset", backbone.preset},
                  {"backbone_preset_given", backbone.preset_given}};
  if (!backbone.notes.empty()) m.provenance["notes"] = backbone.notes;
  return m;
}

}  // namespace mumoe::model
