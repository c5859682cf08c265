#include "nn/backbone_config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>

#include "io/errors.h"

namespace mumoe::nn {
namespace {

void require_positive(int64_t value, const char* name) {
  if (value <= 0) throw UsageError(std::string("backbone: ") + name + " must be positive, got " + std::to_string(value));
}

constexpr std::array<double, 3> kImageNetMean = {0.485, 0.456, 0.406};
constexpr std::array<double, 3> kImageNetStd = {0.229, 0.224, 0.225};
constexpr std::array<double, 3> kClipMean = {0.48145466, 0.4578275, 0.40821073};
constexpr std::array<double, 3> kClipStd = {0.26862954, 0.26130258, 0.27577711};
constexpr std::array<double, 3> kInceptionMean = {0.5, 0.5, 0.5};
constexpr std::array<double, 3> kInceptionStd = {0.5, 0.5, 0.5};

std::array<double, 3> triple(const nlohmann::json& j, const char* name) {
  const auto values = j.at(name).get<std::vector<double>>();
  if (values.size() != 3) throw UsageError(std::string("backbone: preprocess.") + name + " needs 3 values");
  return {values[0], values[1], values[2]};
}

}  // namespace

int64_t ImagePreprocess::resize_size(int64_t image_size) const {
  // timm: scale_size = math.floor(img_size / crop_pct).
  return static_cast<int64_t>(std::floor(static_cast<double>(image_size) / crop_pct + 1e-9));
}

void BackboneConfig::validate() const {
  require_positive(in_channels, "in_channels");
  require_positive(image_size, "image_size");
  require_positive(feature_dim, "feature_dim");
  switch (kind) {
    case BackboneKind::SmallCnn:
      require_positive(channels1, "channels1");
      require_positive(channels2, "channels2");
      if (image_size % 4 != 0)
        throw UsageError("backbone: image_size must be a positive multiple of 4, got " + std::to_string(image_size));
      break;
    case BackboneKind::VisionTransformer:
      require_positive(vit.patch_size, "patch_size");
      require_positive(vit.depth, "depth");
      require_positive(vit.heads, "heads");
      require_positive(vit.mlp_dim, "mlp_dim");
      if (vit.width != feature_dim)
        throw UsageError("backbone: a ViT's features are its width (" + std::to_string(vit.width) + "), not " +
                         std::to_string(feature_dim));
      if (vit.width % vit.heads != 0)
        throw UsageError("backbone: width " + std::to_string(vit.width) + " is not divisible by " +
                         std::to_string(vit.heads) + " heads");
      if (image_size % vit.patch_size != 0)
        throw UsageError("backbone: image_size " + std::to_string(image_size) + " is not a multiple of patch_size " +
                         std::to_string(vit.patch_size));
      if (vit.pool != "token" && vit.pool != "avg")
        throw UsageError("backbone: pool must be 'token' or 'avg', got '" + vit.pool + "'");
      if (vit.pool == "token" && !vit.class_token) throw UsageError("backbone: token pooling needs a class token");
      if (!(vit.norm_eps > 0)) throw UsageError("backbone: norm_eps must be positive");
      for (const auto& [block, mlp] : vit.mumoe_mlps) {
        const std::string name = "backbone: μMoE MLP of block " + std::to_string(block);
        if (block < 0 || block >= vit.depth)
          throw UsageError(name + ": the ViT has blocks 0–" + std::to_string(vit.depth - 1));
        if (!mlp.is_block() || mlp.input_dim != vit.width || mlp.final_output_dim() != vit.width)
          throw UsageError(name + " must be a two-layer μMoE block " + std::to_string(vit.width) + " → hidden → " +
                           std::to_string(vit.width));
        mlp.validate();
      }
      for (const auto& [block, mlp] : vit.router_mlps) {
        const std::string name = "backbone: " + display_name(mlp.router) + " MLP of block " + std::to_string(block);
        if (block < 0 || block >= vit.depth)
          throw UsageError(name + ": the ViT has blocks 0–" + std::to_string(vit.depth - 1));
        if (vit.mumoe_mlps.count(block)) throw UsageError(name + ": the block already has a μMoE MLP");
        if (mlp.input_dim != vit.width || mlp.output_dim != vit.width || mlp.hidden_dim < 1)
          throw UsageError(name + " must map " + std::to_string(vit.width) + " → hidden → " + std::to_string(vit.width));
        mlp.validate();
      }
      break;
    case BackboneKind::ResNet:
      for (auto b : resnet.blocks) require_positive(b, "blocks per stage");
      require_positive(resnet.width_per_group, "width_per_group");
      if (feature_dim != (resnet.bottleneck ? 2048 : 512))
        throw UsageError("backbone: a ResNet's features are its last stage's width, not " + std::to_string(feature_dim));
      break;
    case BackboneKind::TorchScript:
      if (torchscript_file.empty()) throw UsageError("backbone: a TorchScript backbone needs its file");
      break;
    case BackboneKind::MlpMixer: {
      const auto& m = mixer;
      require_positive(m.patch_size, "patch_size");
      require_positive(m.depth, "depth");
      require_positive(m.token_hidden, "token_hidden");
      require_positive(m.channel_hidden, "channel_hidden");
      if (m.width != feature_dim)
        throw UsageError("backbone: a Mixer's features are its width (" + std::to_string(m.width) + "), not " +
                         std::to_string(feature_dim));
      if (image_size % m.patch_size != 0)
        throw UsageError("backbone: image_size " + std::to_string(image_size) + " is not a multiple of patch_size " +
                         std::to_string(m.patch_size));
      if (!(m.norm_eps > 0)) throw UsageError("backbone: norm_eps must be positive");
      const int64_t tokens = (image_size / m.patch_size) * (image_size / m.patch_size);
      for (const auto* layers : {&m.token_mumoe, &m.channel_mumoe}) {
        const bool token = layers == &m.token_mumoe;
        const int64_t outer = token ? tokens : m.width;
        for (const auto& [block, mlp] : *layers) {
          const std::string name = std::string("backbone: μMoE ") + (token ? "token" : "channel") +
                                   "-mixing MLP of block " + std::to_string(block);
          if (block < 0 || block >= m.depth)
            throw UsageError(name + ": the Mixer has blocks 0–" + std::to_string(m.depth - 1));
          if (!mlp.is_block() || mlp.input_dim != outer || mlp.final_output_dim() != outer)
            throw UsageError(name + " must be a two-layer μMoE block " + std::to_string(outer) + " → hidden → " +
                             std::to_string(outer));
          mlp.validate();
        }
      }
      break;
    }
  }
  if (preprocess.enabled) {
    if (in_channels != 3)
      throw UsageError("backbone: preprocessing normalises RGB images; the backbone takes " +
                       std::to_string(in_channels) + " channels");
    if (!(preprocess.crop_pct > 0 && preprocess.crop_pct <= 1))
      throw UsageError("backbone: preprocess.crop_pct must be in (0, 1]");
    if (preprocess.interpolation != "bicubic" && preprocess.interpolation != "bilinear")
      throw UsageError("backbone: preprocess.interpolation must be bicubic or bilinear, got '" +
                       preprocess.interpolation + "'");
    for (double s : preprocess.std)
      if (!(s > 0)) throw UsageError("backbone: preprocess.std must be positive");
  }
}

std::string BackboneConfig::type_name() const {
  switch (kind) {
    case BackboneKind::SmallCnn: return "cnn2";
    case BackboneKind::VisionTransformer: return "vit";
    case BackboneKind::ResNet: return "resnet";
    case BackboneKind::TorchScript: return "torchscript";
    case BackboneKind::MlpMixer: return "mixer";
  }
  return "?";
}

int64_t BackboneConfig::patch_size() const {
  if (kind == BackboneKind::VisionTransformer) return vit.patch_size;
  if (kind == BackboneKind::MlpMixer) return mixer.patch_size;
  return 0;
}

std::string BackboneConfig::describe() const {
  switch (kind) {
    case BackboneKind::SmallCnn:
      return "CNN " + std::to_string(image_size) + " px";
    case BackboneKind::VisionTransformer:
      return "ViT/" + std::to_string(vit.patch_size) + " " + std::to_string(image_size) + " px (" +
             std::to_string(vit.depth) + " blocks, width " + std::to_string(vit.width) + ", " +
             std::to_string(vit.heads) + " heads, " + (vit.activation == MlpActivation::QuickGelu ? "QuickGELU" : "GELU") +
             (vit.mumoe_mlps.empty() ? std::string()
                                     : ", μMoE MLPs in " + std::to_string(vit.mumoe_mlps.size()) + " blocks") +
             (vit.router_mlps.empty()
                  ? std::string()
                  : ", " + display_name(vit.router_mlps.begin()->second.router) + " MLPs in " +
                        std::to_string(vit.router_mlps.size()) + " blocks") +
             ")";
    case BackboneKind::ResNet: {
      int64_t layers = 2;
      for (auto b : resnet.blocks) layers += b * (resnet.bottleneck ? 3 : 2);
      return "ResNet-" + std::to_string(layers) + " " + std::to_string(image_size) + " px";
    }
    case BackboneKind::TorchScript:
      return "TorchScript " + torchscript_file + " " + std::to_string(image_size) + " px";
    case BackboneKind::MlpMixer: {
      const auto& m = mixer;
      const auto experts = m.token_mumoe.size() + m.channel_mumoe.size();
      return "MLP-Mixer/" + std::to_string(m.patch_size) + " " + std::to_string(image_size) + " px (" +
             std::to_string(m.depth) + " blocks, width " + std::to_string(m.width) +
             (experts ? ", " + std::to_string(experts) + " μMoE mixing MLPs" : std::string()) + ")";
    }
  }
  return "?";
}

nlohmann::json to_json(const BackboneConfig& c) {
  nlohmann::json j = {{"type", c.type_name()},
                      {"in_channels", c.in_channels},
                      {"image_size", c.image_size},
                      {"feature_dim", c.feature_dim}};
  switch (c.kind) {
    case BackboneKind::SmallCnn:
      j["channels1"] = c.channels1;
      j["channels2"] = c.channels2;
      break;
    case BackboneKind::VisionTransformer:
      j["patch_size"] = c.vit.patch_size;
      j["depth"] = c.vit.depth;
      j["heads"] = c.vit.heads;
      j["mlp_dim"] = c.vit.mlp_dim;
      j["patch_bias"] = c.vit.patch_bias;
      j["class_token"] = c.vit.class_token;
      j["pos_embed_class"] = c.vit.pos_embed_class;
      j["norm_pre"] = c.vit.norm_pre;
      j["layer_scale"] = c.vit.layer_scale;
      j["pool"] = c.vit.pool;
      j["fc_norm"] = c.vit.fc_norm;
      j["activation"] = to_string(c.vit.activation);
      j["norm_eps"] = c.vit.norm_eps;
      break;
    case BackboneKind::ResNet:
      j["blocks"] = c.resnet.blocks;
      j["bottleneck"] = c.resnet.bottleneck;
      j["width_per_group"] = c.resnet.width_per_group;
      break;
    case BackboneKind::TorchScript:
      j["file"] = c.torchscript_file;
      break;
    case BackboneKind::MlpMixer:
      j["patch_size"] = c.mixer.patch_size;
      j["depth"] = c.mixer.depth;
      j["token_hidden"] = c.mixer.token_hidden;
      j["channel_hidden"] = c.mixer.channel_hidden;
      j["norm_eps"] = c.mixer.norm_eps;
      break;
  }
  if (c.preprocess.enabled)
    j["preprocess"] = {{"crop_pct", c.preprocess.crop_pct},
                       {"interpolation", c.preprocess.interpolation},
                       {"mean", c.preprocess.mean},
                       {"std", c.preprocess.std}};
  return j;
}

BackboneConfig backbone_config_from_json(const nlohmann::json& j) {
  BackboneConfig c;
  try {
    const auto type = j.value("type", std::string("cnn2"));
    c.in_channels = j.at("in_channels").get<int64_t>();
    c.image_size = j.at("image_size").get<int64_t>();
    c.feature_dim = j.at("feature_dim").get<int64_t>();
    if (type == "cnn2") {
      c.kind = BackboneKind::SmallCnn;
      c.channels1 = j.at("channels1").get<int64_t>();
      c.channels2 = j.at("channels2").get<int64_t>();
    } else if (type == "vit") {
      c.kind = BackboneKind::VisionTransformer;
      auto& v = c.vit;
      v.width = c.feature_dim;
      v.patch_size = j.at("patch_size").get<int64_t>();
      v.depth = j.at("depth").get<int64_t>();
      v.heads = j.at("heads").get<int64_t>();
      v.mlp_dim = j.at("mlp_dim").get<int64_t>();
      v.patch_bias = j.at("patch_bias").get<bool>();
      v.class_token = j.at("class_token").get<bool>();
      v.pos_embed_class = j.at("pos_embed_class").get<bool>();
      v.norm_pre = j.at("norm_pre").get<bool>();
      v.layer_scale = j.at("layer_scale").get<bool>();
      v.pool = j.at("pool").get<std::string>();
      v.fc_norm = j.at("fc_norm").get<bool>();
      v.activation = parse_mlp_activation(j.at("activation").get<std::string>());
      v.norm_eps = j.at("norm_eps").get<double>();
    } else if (type == "resnet") {
      c.kind = BackboneKind::ResNet;
      c.resnet.blocks = j.at("blocks").get<std::array<int64_t, 4>>();
      c.resnet.bottleneck = j.at("bottleneck").get<bool>();
      c.resnet.width_per_group = j.at("width_per_group").get<int64_t>();
    } else if (type == "torchscript") {
      c.kind = BackboneKind::TorchScript;
      c.torchscript_file = j.at("file").get<std::string>();
    } else if (type == "mixer") {
      c.kind = BackboneKind::MlpMixer;
      auto& m = c.mixer;
      m.width = c.feature_dim;
      m.patch_size = j.at("patch_size").get<int64_t>();
      m.depth = j.at("depth").get<int64_t>();
      m.token_hidden = j.at("token_hidden").get<int64_t>();
      m.channel_hidden = j.at("channel_hidden").get<int64_t>();
      m.norm_eps = j.at("norm_eps").get<double>();
    } else {
      throw UsageError("backbone type '" + type + "' is not supported (cnn2, vit, resnet, torchscript, mixer)");
    }
    if (j.contains("preprocess")) {
      const auto& p = j.at("preprocess");
      c.preprocess.enabled = true;
      c.preprocess.crop_pct = p.at("crop_pct").get<double>();
      c.preprocess.interpolation = p.at("interpolation").get<std::string>();
      c.preprocess.mean = triple(p, "mean");
      c.preprocess.std = triple(p, "std");
    }
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(std::string("backbone configuration: ") + e.what());
  }
  c.validate();
  return c;
}

namespace {

// One row per preset: what timm.create_model(name) (or torchvision) builds and how its eval
// transform prepares images. `kind` is the backbone it describes (TorchScript backbones take any
// preset's preprocessing); `activation`/`norm_eps` apply to ViTs only.
struct Preset {
  const char* name;
  std::optional<BackboneKind> kind;  ///< none: preprocessing only, for any backbone
  MlpActivation activation;
  double norm_eps;
  double crop_pct;
  const char* interpolation;
  std::array<double, 3> mean, std;
};

const std::vector<Preset>& presets() {
  using K = BackboneKind;
  using A = MlpActivation;
  // timm builds vit_base_patch32_clip_224.openai with GELU (its notes say the weights are natively
  // QuickGELU); the _quickgelu_ variant, like open_clip, builds QuickGELU. The dino config sets no
  // crop_pct: timm's ViT default 0.9. timm's ViT default mean/std is the augreg ViTs' 0.5.
  static const std::vector<Preset> table = {
      {"vit_base_patch32_clip_224.openai", K::VisionTransformer, A::Gelu, 1e-5, 0.9, "bicubic", kClipMean, kClipStd},
      {"vit_base_patch32_clip_quickgelu_224.openai", K::VisionTransformer, A::QuickGelu, 1e-5, 0.9, "bicubic",
       kClipMean, kClipStd},
      {"vit_base_patch16_224.dino", K::VisionTransformer, A::Gelu, 1e-6, 0.9, "bicubic", kImageNetMean, kImageNetStd},
      {"vit", K::VisionTransformer, A::Gelu, 1e-6, 0.9, "bicubic", kInceptionMean, kInceptionStd},
      {"resnet", K::ResNet, A::Gelu, 0, 0.875, "bilinear", kImageNetMean, kImageNetStd},
      // experts/mlp_mixer.py's transform_te: Resize(256, antialias=True) (bilinear), CenterCrop(224).
      {"mixer", K::MlpMixer, A::Gelu, 0, 0.875, "bilinear", kImageNetMean, kImageNetStd},
      {"imagenet", std::nullopt, A::Gelu, 0, 0.875, "bicubic", kImageNetMean, kImageNetStd},
  };
  return table;
}

}  // namespace

std::vector<std::string> backbone_preset_names() {
  std::vector<std::string> names;
  for (const auto& p : presets()) names.push_back(p.name);
  return names;
}

void apply_backbone_preset(BackboneConfig& c, const std::string& name) {
  const auto& table = presets();
  const auto it = std::find_if(table.begin(), table.end(), [&](const Preset& p) { return name == p.name; });
  if (it == table.end()) {
    std::string names;
    for (const auto& n : backbone_preset_names()) names += (names.empty() ? "" : ", ") + n;
    throw UsageError("unknown preset '" + name + "' (presets: " + names + ")");
  }
  const auto& preset = *it;
  // A TorchScript backbone takes any preset's preprocessing; its own code fixes the rest.
  if (preset.kind && *preset.kind != c.kind && c.kind != BackboneKind::TorchScript) {
    BackboneConfig wanted;
    wanted.kind = *preset.kind;
    throw UsageError("preset '" + name + "' is for a " + wanted.type_name() + " backbone, but the model's is a " +
                     c.type_name());
  }
  if (c.kind == BackboneKind::VisionTransformer && preset.kind == BackboneKind::VisionTransformer) {
    c.vit.activation = preset.activation;
    c.vit.norm_eps = preset.norm_eps;
  }
  auto& p = c.preprocess;
  p.enabled = true;
  p.crop_pct = preset.crop_pct;
  p.interpolation = preset.interpolation;
  p.mean = preset.mean;
  p.std = preset.std;
}

std::string to_string(MlpActivation a) { return a == MlpActivation::QuickGelu ? "quick_gelu" : "gelu"; }

MlpActivation parse_mlp_activation(const std::string& text) {
  const auto t = lowercase(text);
  if (t == "gelu") return MlpActivation::Gelu;
  if (t == "quick_gelu" || t == "quickgelu") return MlpActivation::QuickGelu;
  throw UsageError("unknown MLP activation '" + text + "' (expected gelu or quick_gelu)");
}

LayerConfig mumoe_mlp_config(int64_t width, int64_t hidden, int64_t experts, int64_t cp_rank,
                             GateActivationKind activation) {
  LayerConfig c;
  c.factorization = Factorization::CP;
  c.input_dim = width;
  c.output_dim = hidden;
  c.second_dim = width;
  c.expert_dims = {experts};
  c.cp_rank = cp_rank;
  c.use_bias = true;
  c.gate_norm = GateNorm::LayerNorm;
  c.gate_activation = activation;
  c.input_layer_norm = true;
  c.validate();
  return c;
}

LayerConfig mixer_mumoe_config(int64_t outer, int64_t hidden, int64_t experts, int64_t cp_rank,
                               GateActivationKind activation) {
  auto c = mumoe_mlp_config(outer, hidden, experts, cp_rank, activation);
  c.gate_norm = GateNorm::BatchNorm;
  c.input_layer_norm = false;
  c.validate();
  return c;
}

MoELayerConfig router_mlp_config(RouterKind router, int64_t width, int64_t experts, int64_t expert_hidden,
                                 int64_t tokens) {
  MoELayerConfig c;
  c.router = router;
  c.input_dim = width;
  c.output_dim = width;
  c.hidden_dim = expert_hidden;
  c.experts = experts;
  c.group_size = tokens;
  c.validate();
  return c;
}

int64_t parameter_matched_expert_hidden(int64_t width, int64_t hidden, int64_t experts) {
  const int64_t dense = 2 * width * hidden + hidden + width;
  // Router I·n and the experts' output biases n·I come first; each unit of hidden width costs
  // n·(I + 1 + I).
  const int64_t h = (dense - 2 * width * experts) / (experts * (2 * width + 1));
  if (h < 1)
    throw UsageError(std::to_string(experts) + " experts cannot match the parameters of a " + std::to_string(width) +
                     " → " + std::to_string(hidden) + " → " + std::to_string(width) +
                     " MLP (their router and biases alone exceed it); give --mlp-hidden");
  return h;
}

LayerConfig mumoe_tr_mlp_config(int64_t width, int64_t hidden, int64_t experts, std::vector<int64_t> tr_ranks,
                                GateActivationKind activation) {
  auto c = mumoe_mlp_config(width, hidden, experts, 1, activation);
  c.factorization = Factorization::TR;
  c.cp_rank = 0;
  c.tr_ranks = std::move(tr_ranks);
  c.validate();
  return c;
}

std::vector<int64_t> parameter_matched_tr_ranks(int64_t width, int64_t hidden, int64_t experts) {
  const int64_t dense = 2 * width * hidden + hidden + width;
  auto count = [&](int64_t r) { return count_parameters(mumoe_tr_mlp_config(width, hidden, experts, {4, 4, r})).total(); };
  if (count(1) > dense)
    throw UsageError("no TR μMoE block of " + std::to_string(experts) + " experts with ring ranks {4, 4, r} has as few "
                     "parameters as the dense MLP (" + std::to_string(dense) + ")");
  // The count grows with r; the largest r within the dense MLP's budget.
  int64_t r = 1;
  while (count(r + 1) <= dense) ++r;
  return {4, 4, r};
}

int64_t parameter_matched_cp_rank(int64_t width, int64_t hidden, int64_t experts) {
  const int64_t dense = 2 * width * hidden + hidden + width;
  // Per unit of rank: U1 (experts) + U2 (width+1) + U3 (hidden), then the same for layer 2;
  // gating (width·experts) and the input LayerNorm (2·width) come on top.
  const int64_t per_rank = 2 * experts + (width + 1) + hidden + (hidden + 1) + width;
  return std::max<int64_t>(1, (dense - width * experts - 2 * width) / per_rank);
}

}  // namespace mumoe::nn
