#include "nn/vision_backbones.h"

#include <torch/script.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <cmath>

#include "io/errors.h"
#include "nn/mlp_mixer.h"

namespace mumoe::nn {
namespace {

namespace tnn = torch::nn;

// ---------------------------------------------------------------------------------------------
// The demos' CNN. Its children are registered as "0" … "11" (a Sequential's names), so the
// tensors keep the keys "backbone.0.weight", … that every demo file has.
class SmallCnnImpl : public BackboneImpl {
 public:
  explicit SmallCnnImpl(const BackboneConfig& b) {
    const int64_t spatial = b.image_size / 4;
    layers_ = tnn::Sequential(
        tnn::Conv2d(tnn::Conv2dOptions(b.in_channels, b.channels1, 3).padding(1)), tnn::BatchNorm2d(b.channels1),
        tnn::ReLU(), tnn::MaxPool2d(2),
        tnn::Conv2d(tnn::Conv2dOptions(b.channels1, b.channels2, 3).padding(1)), tnn::BatchNorm2d(b.channels2),
        tnn::ReLU(), tnn::MaxPool2d(2), tnn::Flatten(),
        tnn::Linear(b.channels2 * spatial * spatial, b.feature_dim), tnn::ReLU(), tnn::Dropout(0.25));
    for (const auto& child : layers_->named_children()) register_module(child.key(), child.value());
  }
  torch::Tensor forward(const torch::Tensor& images) override { return layers_->forward(images); }

 private:
  tnn::Sequential layers_{nullptr};
};

// ---------------------------------------------------------------------------------------------
// timm's VisionTransformer (timm/models/vision_transformer.py), eval mode, num_classes = 0.

torch::Tensor quick_gelu(const torch::Tensor& x) { return x * torch::sigmoid(1.702 * x); }

struct PatchEmbedImpl : tnn::Module {
  PatchEmbedImpl(const BackboneConfig& b) {
    proj = register_module("proj", tnn::Conv2d(tnn::Conv2dOptions(b.in_channels, b.vit.width, b.vit.patch_size)
                                                    .stride(b.vit.patch_size)
                                                    .bias(b.vit.patch_bias)));
  }
  // [B, C, H, W] → [B, patches, D] in row-major patch order (timm: flatten(2).transpose(1, 2)).
  torch::Tensor forward(const torch::Tensor& x) { return proj->forward(x).flatten(2).transpose(1, 2); }
  tnn::Conv2d proj{nullptr};
};
TORCH_MODULE(PatchEmbed);

struct VitAttentionImpl : tnn::Module {
  VitAttentionImpl(int64_t width, int64_t heads) : heads(heads), head_dim(width / heads) {
    qkv = register_module("qkv", tnn::Linear(tnn::LinearOptions(width, 3 * width)));
    proj = register_module("proj", tnn::Linear(width, width));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    const auto batch = x.size(0), tokens = x.size(1), width = x.size(2);
    const auto qkv_heads = qkv->forward(x).reshape({batch, tokens, 3, heads, head_dim}).permute({2, 0, 3, 1, 4});
    const auto q = qkv_heads[0], k = qkv_heads[1], v = qkv_heads[2];
#if TORCH_VERSION_MAJOR >= 2
    // PyTorch 2.x: the fused kernel timm itself uses (fused_attn).
    auto out = at::scaled_dot_product_attention(q, k, v);
#else
    const auto scores = torch::matmul(q * (1.0 / std::sqrt(static_cast<double>(head_dim))), k.transpose(-2, -1));
    auto out = torch::matmul(torch::softmax(scores, -1), v);
#endif
    return proj->forward(out.transpose(1, 2).reshape({batch, tokens, width}));
  }
  int64_t heads, head_dim;
  tnn::Linear qkv{nullptr}, proj{nullptr};
};
TORCH_MODULE(VitAttention);

struct VitMlpImpl : tnn::Module {
  VitMlpImpl(int64_t width, int64_t hidden, MlpActivation activation) : activation(activation) {
    fc1 = register_module("fc1", tnn::Linear(width, hidden));
    fc2 = register_module("fc2", tnn::Linear(hidden, width));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    const auto h = fc1->forward(x);
    return fc2->forward(activation == MlpActivation::QuickGelu ? quick_gelu(h) : torch::gelu(h));
  }
  MlpActivation activation;
  tnn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(VitMlp);

struct LayerScaleImpl : tnn::Module {
  explicit LayerScaleImpl(int64_t width) { gamma = register_parameter("gamma", torch::ones({width})); }
  torch::Tensor forward(const torch::Tensor& x) { return x * gamma; }
  torch::Tensor gamma;
};
TORCH_MODULE(LayerScale);

tnn::LayerNorm layer_norm(int64_t width, double eps) {
  return tnn::LayerNorm(tnn::LayerNormOptions({width}).eps(eps));
}

struct VitBlockImpl : tnn::Module {
  VitBlockImpl(const VitConfig& c, int64_t index) {
    norm1 = register_module("norm1", layer_norm(c.width, c.norm_eps));
    attn = register_module("attn", VitAttention(c.width, c.heads));
    norm2 = register_module("norm2", layer_norm(c.width, c.norm_eps));
    if (auto it = c.mumoe_mlps.find(index); it != c.mumoe_mlps.end())
      mumoe_mlp = register_module("mlp", MuMoEBlock(it->second));
    else if (auto r = c.router_mlps.find(index); r != c.router_mlps.end())
      router_mlp = register_module("mlp", MoELayer(r->second));
    else
      mlp = register_module("mlp", VitMlp(c.width, c.mlp_dim, c.activation));
    if (c.layer_scale) {
      ls1 = register_module("ls1", LayerScale(c.width));
      ls2 = register_module("ls2", LayerScale(c.width));
    }
  }
  // x + attention: the stream the MLP half reads.
  torch::Tensor attention_residual(const torch::Tensor& x) {
    auto a = attn->forward(norm1->forward(x));
    return x + (ls1 ? ls1->forward(a) : a);
  }
  // h + MLP: acts on each token alone.
  torch::Tensor mlp_residual(const torch::Tensor& h, const ExpertAblation& ablation = {}) {
    torch::Tensor m;
    if (mumoe_mlp) {
      m = mumoe_mlp->forward(norm2->forward(h), ablation).output;
    } else if (router_mlp) {
      auto out = router_mlp->forward(norm2->forward(h), ablation.experts_per_mode.empty()
                                                            ? std::vector<int64_t>{}
                                                            : ablation.experts_per_mode.front());
      // Kept for training: the backbone's auxiliary_loss() sums the blocks' (study App. A).
      aux_loss = out.aux_loss;
      m = out.output;
    } else {
      m = mlp->forward(norm2->forward(h));
    }
    return h + (ls2 ? ls2->forward(m) : m);
  }
  // h_token + MLP(norm2(h))_token under each row of `removed` [R, N] (undefined: each expert
  // alone): [B, R, D].
  torch::Tensor router_token_residuals(const torch::Tensor& h, int64_t token, const torch::Tensor& removed) {
    const auto contributions = router_mlp->contributions_at_token(norm2->forward(h), token);  // [B, N, D]
    const auto y = contributions.sum(1, /*keepdim=*/true);
    const auto m = removed.defined()
                       ? y - torch::einsum("rn,bnd->brd", {removed.to(contributions.options()), contributions})
                       : y - contributions;
    return h.select(1, token).unsqueeze(1) + (ls2 ? ls2->forward(m) : m);
  }
  bool has_expert_mlp() const { return !mumoe_mlp.is_empty() || !router_mlp.is_empty(); }
  torch::Tensor forward(const torch::Tensor& x, const ExpertAblation& ablation = {}) {
    return mlp_residual(attention_residual(x), ablation);
  }
  tnn::LayerNorm norm1{nullptr}, norm2{nullptr};
  VitAttention attn{nullptr};
  VitMlp mlp{nullptr};
  MuMoEBlock mumoe_mlp{nullptr};  ///< instead of mlp, when configured
  MoELayer router_mlp{nullptr};   ///< instead of mlp, when configured
  torch::Tensor aux_loss;         ///< router_mlp's load-balancing loss of the last forward pass
  LayerScale ls1{nullptr}, ls2{nullptr};
};
TORCH_MODULE(VitBlock);

class VisionTransformerImpl : public BackboneImpl, public TokenBackbone {
 public:
  explicit VisionTransformerImpl(const BackboneConfig& b) : config_(b.vit) {
    const auto& c = config_;
    const int64_t patches = (b.image_size / c.patch_size) * (b.image_size / c.patch_size);
    patch_embed_ = register_module("patch_embed", PatchEmbed(b));
    if (c.class_token) cls_token_ = register_parameter("cls_token", torch::zeros({1, 1, c.width}));
    const int64_t positions = patches + (c.class_token && c.pos_embed_class ? 1 : 0);
    pos_embed_ = register_parameter("pos_embed", torch::randn({1, positions, c.width}) * 0.02);
    if (c.norm_pre) norm_pre_ = register_module("norm_pre", layer_norm(c.width, c.norm_eps));
    blocks_ = register_module("blocks", tnn::ModuleList());
    for (int64_t i = 0; i < c.depth; ++i) blocks_->push_back(VitBlock(c, i));
    // timm: use_fc_norm replaces the final norm by Identity and normalises after pooling.
    if (c.fc_norm)
      fc_norm_ = register_module("fc_norm", layer_norm(c.width, c.norm_eps));
    else
      norm_ = register_module("norm", layer_norm(c.width, c.norm_eps));
  }

  torch::Tensor forward(const torch::Tensor& images) override {
    auto x = embed(images);
    for (int64_t i = 0; i < config_.depth; ++i) x = block(i)->forward(x);
    return pool(x);
  }

  TokenBackbone* tokens() override { return this; }
  int64_t depth() const override { return config_.depth; }
  int64_t prefix_tokens() const override { return config_.class_token ? 1 : 0; }
  MuMoEBlock mumoe_mlp(int64_t index) const override { return block(index)->mumoe_mlp; }
  MoELayer router_mlp(int64_t index) const override { return block(index)->router_mlp; }

  torch::Tensor auxiliary_loss() const override {
    torch::Tensor total;
    for (int64_t i = 0; i < config_.depth; ++i) {
      const auto& loss = block(i)->aux_loss;
      if (loss.defined()) total = total.defined() ? total + loss : loss;
    }
    return total;
  }

  torch::Tensor embed(const torch::Tensor& images) override {
    const auto& c = config_;
    auto x = patch_embed_->forward(images);
    const auto batch = x.size(0);
    // timm's _pos_embed: the class token is concatenated before or after adding positions.
    if (!c.class_token) {
      x = x + pos_embed_;
    } else if (c.pos_embed_class) {
      x = torch::cat({cls_token_.expand({batch, -1, -1}), x}, 1) + pos_embed_;
    } else {
      x = torch::cat({cls_token_.expand({batch, -1, -1}), x + pos_embed_}, 1);
    }
    return norm_pre_ ? norm_pre_->forward(x) : x;
  }

  torch::Tensor run_block(const torch::Tensor& stream, int64_t index, const ExpertAblation& ablation) override {
    auto b = block(index);
    if (!ablation.empty() && !b->has_expert_mlp())
      throw UsageError("block " + std::to_string(index) + "'s MLP is not a μMoE or MoE layer: nothing to ablate");
    return b->forward(stream, ablation);
  }

  torch::Tensor attention_residual(const torch::Tensor& stream, int64_t index) override {
    return block(index)->attention_residual(stream);
  }

  torch::Tensor mlp_residual(const torch::Tensor& attended, int64_t index, const ExpertAblation& ablation) override {
    auto b = block(index);
    if (!ablation.empty() && !b->has_expert_mlp())
      throw UsageError("block " + std::to_string(index) + "'s MLP is not a μMoE or MoE layer: nothing to ablate");
    return b->mlp_residual(attended, ablation);
  }

  torch::Tensor router_mlp_token_residuals(const torch::Tensor& attended, int64_t index, int64_t token,
                                           const torch::Tensor& removed) override {
    auto b = block(index);
    if (!b->router_mlp) throw UsageError("block " + std::to_string(index) + "'s MLP is not a sparse or soft MoE layer");
    if (removed.defined() && (removed.dim() != 2 || removed.size(1) != b->router_mlp->config().experts))
      throw UsageError("the ablations of block " + std::to_string(index) + " take a mask [R, " +
                       std::to_string(b->router_mlp->config().experts) + "], got " + c10::str(removed.sizes()));
    return b->router_token_residuals(attended, token, removed);
  }

  torch::Tensor mlp_residual_keeping(const torch::Tensor& attended, int64_t index,
                                     std::vector<torch::Tensor>& coefficients) override {
    auto b = block(index);
    if (!b->mumoe_mlp) return TokenBackbone::mlp_residual_keeping(attended, index, coefficients);
    auto out = b->mumoe_mlp->forward(b->norm2->forward(attended));
    coefficients = std::move(out.coefficients);
    return attended + (b->ls2 ? b->ls2->forward(out.output) : out.output);
  }

  std::vector<torch::Tensor> mlp_coefficients(const torch::Tensor& attended, int64_t index) override {
    auto b = block(index);
    if (b->router_mlp) return {b->router_mlp->forward(b->norm2->forward(attended)).coefficients};
    if (!b->mumoe_mlp) throw UsageError("block " + std::to_string(index) + "'s MLP is not a μMoE or MoE layer");
    return b->mumoe_mlp->coefficients(b->norm2->forward(attended));
  }

  bool pools_class_token() const override { return config_.pool == "token"; }

  torch::Tensor pool(const torch::Tensor& stream) override {
    const auto& c = config_;
    auto x = norm_ ? norm_->forward(stream) : stream;
    x = c.pool == "token" ? x.select(1, 0) : x.slice(1, prefix_tokens()).mean(1);
    return fc_norm_ ? fc_norm_->forward(x) : x;
  }

 private:
  VitBlock block(int64_t index) const {
    if (index < 0 || index >= config_.depth)
      throw UsageError("the ViT has blocks 0–" + std::to_string(config_.depth - 1) + ", not " + std::to_string(index));
    return VitBlock(blocks_->ptr<VitBlockImpl>(static_cast<size_t>(index)));
  }

  VitConfig config_;
  PatchEmbed patch_embed_{nullptr};
  torch::Tensor cls_token_, pos_embed_;
  tnn::LayerNorm norm_pre_{nullptr}, norm_{nullptr}, fc_norm_{nullptr};
  tnn::ModuleList blocks_{nullptr};
};

// ---------------------------------------------------------------------------------------------
// torchvision's ResNet (torchvision/models/resnet.py, v1.5: the stride sits in the 3×3 conv).

tnn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
  return tnn::Conv2d(tnn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
}

struct ResidualBlockImpl : tnn::Module {
  ResidualBlockImpl(int64_t inplanes, int64_t planes, int64_t stride, bool bottleneck, int64_t width_per_group)
      : bottleneck(bottleneck) {
    const int64_t expansion = bottleneck ? 4 : 1;
    if (bottleneck) {
      const int64_t width = planes * width_per_group / 64;
      conv1 = register_module("conv1", conv(inplanes, width, 1, 1));
      bn1 = register_module("bn1", tnn::BatchNorm2d(width));
      conv2 = register_module("conv2", conv(width, width, 3, stride));
      bn2 = register_module("bn2", tnn::BatchNorm2d(width));
      conv3 = register_module("conv3", conv(width, planes * expansion, 1, 1));
      bn3 = register_module("bn3", tnn::BatchNorm2d(planes * expansion));
    } else {
      conv1 = register_module("conv1", conv(inplanes, planes, 3, stride));
      bn1 = register_module("bn1", tnn::BatchNorm2d(planes));
      conv2 = register_module("conv2", conv(planes, planes, 3, 1));
      bn2 = register_module("bn2", tnn::BatchNorm2d(planes));
    }
    if (stride != 1 || inplanes != planes * expansion)
      downsample = register_module(
          "downsample", tnn::Sequential(conv(inplanes, planes * expansion, 1, stride),
                                        tnn::BatchNorm2d(planes * expansion)));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto out = torch::relu(bn1->forward(conv1->forward(x)));
    out = bn2->forward(conv2->forward(out));
    if (bottleneck) out = bn3->forward(conv3->forward(torch::relu(out)));
    return torch::relu(out + (downsample ? downsample->forward(x) : x));
  }
  bool bottleneck;
  tnn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  tnn::BatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr};
  tnn::Sequential downsample{nullptr};
};
TORCH_MODULE(ResidualBlock);

class ResNetImpl : public BackboneImpl {
 public:
  explicit ResNetImpl(const BackboneConfig& b) {
    const auto& c = b.resnet;
    conv1_ = register_module("conv1", tnn::Conv2d(tnn::Conv2dOptions(b.in_channels, 64, 7).stride(2).padding(3).bias(false)));
    bn1_ = register_module("bn1", tnn::BatchNorm2d(64));
    int64_t inplanes = 64;
    const int64_t expansion = c.bottleneck ? 4 : 1;
    for (int stage = 0; stage < 4; ++stage) {
      const int64_t planes = int64_t{64} << stage;
      tnn::Sequential layer;
      for (int64_t i = 0; i < c.blocks[stage]; ++i) {
        layer->push_back(ResidualBlock(inplanes, planes, i == 0 && stage > 0 ? 2 : 1, c.bottleneck, c.width_per_group));
        inplanes = planes * expansion;
      }
      stages_.push_back(register_module("layer" + std::to_string(stage + 1), layer));
    }
  }
  torch::Tensor forward(const torch::Tensor& images) override {
    auto x = torch::relu(bn1_->forward(conv1_->forward(images)));
    x = torch::max_pool2d(x, 3, 2, 1);
    for (auto& stage : stages_) x = stage->forward(x);
    return x.mean({2, 3});  // AdaptiveAvgPool2d(1) + flatten
  }

 private:
  tnn::Conv2d conv1_{nullptr};
  tnn::BatchNorm2d bn1_{nullptr};
  std::vector<tnn::Sequential> stages_;
};

// ---------------------------------------------------------------------------------------------
// A backbone in a TorchScript archive (torch.jit.trace/script + save). Its weights are not our
// parameters: they stay in the archive, so model files and exports hold only the head.
class TorchScriptBackboneImpl : public BackboneImpl {
 public:
  explicit TorchScriptBackboneImpl(const BackboneConfig& b) : file_(b.torchscript_file), width_(b.feature_dim) {
    try {
      module_ = torch::jit::load(file_, torch::kCPU);
    } catch (const c10::Error& e) {
      throw FileError(file_, std::string("is not a readable TorchScript archive (torch.jit.save): ") +
                                 e.what_without_backtrace());
    }
    module_.eval();
    // Validate before use: one blank image must give [1, D] features.
    torch::NoGradGuard no_grad;
    forward(torch::zeros({1, b.in_channels, b.image_size, b.image_size}));
  }
  torch::Tensor forward(const torch::Tensor& images) override {
    c10::IValue out;
    try {
      out = module_.forward({images});
    } catch (const c10::Error& e) {
      throw FileError(file_, "failed on images " + c10::str(images.sizes()) + ": " + e.what_without_backtrace());
    }
    if (!out.isTensor())
      throw FileError(file_, "returns a " + out.tagKind() + ", not a tensor of features [B, D]");
    auto features = out.toTensor();
    if (features.dim() != 2 || features.size(0) != images.size(0) || features.size(1) != width_)
      throw FileError(file_, "returns features of shape " + c10::str(features.sizes()) + ", expected [" +
                                 std::to_string(images.size(0)) + ", " + std::to_string(width_) +
                                 "] (the μMoE head's input width)");
    // Every caller (evaluate, analyze, export's verification) gets the same answer: features in
    // the images' dtype — a backbone that returns float64 or float16 is converted, one that
    // returns integers is refused — and never a NaN passed on silently.
    if (!features.is_floating_point())
      throw FileError(file_, "returns features of type " + std::string(c10::toString(features.scalar_type())) +
                                 ", not floating point");
    features = features.to(images.scalar_type());
    if (const auto finite = torch::isfinite(features).all(1); !finite.all().item<bool>()) {
      const auto row = (~finite).nonzero()[0][0].item<int64_t>();
      throw FileError(file_, "returns non-finite features (NaN or infinity) for image " + std::to_string(row) +
                                 " of a batch of " + std::to_string(images.size(0)));
    }
    return features;
  }
  // The archive's module is not a registered child: move it with us.
  void to(torch::Device device, torch::Dtype dtype, bool non_blocking) override {
    module_.to(device, dtype, non_blocking);
    BackboneImpl::to(device, dtype, non_blocking);
  }
  void to(torch::Dtype dtype, bool non_blocking) override {
    module_.to(dtype, non_blocking);
    BackboneImpl::to(dtype, non_blocking);
  }
  void to(torch::Device device, bool non_blocking) override {
    module_.to(device, non_blocking);
    BackboneImpl::to(device, non_blocking);
  }

 private:
  std::string file_;
  int64_t width_;
  torch::jit::Module module_;
};

}  // namespace

std::shared_ptr<BackboneImpl> make_backbone(const BackboneConfig& config) {
  config.validate();
  switch (config.kind) {
    case BackboneKind::SmallCnn: return std::make_shared<SmallCnnImpl>(config);
    case BackboneKind::VisionTransformer: return std::make_shared<VisionTransformerImpl>(config);
    case BackboneKind::ResNet: return std::make_shared<ResNetImpl>(config);
    case BackboneKind::TorchScript: return std::make_shared<TorchScriptBackboneImpl>(config);
    case BackboneKind::MlpMixer: return make_mlp_mixer(config);
  }
  throw UsageError("unknown backbone kind");
}

torch::Tensor preprocess_images(const torch::Tensor& images, const BackboneConfig& config) {
  const auto& p = config.preprocess;
  if (!p.enabled) return images;
  auto x = images;
  if (x.size(1) == 1 && config.in_channels == 3) x = x.expand({-1, 3, -1, -1});
  // torchvision's Resize(int): the shorter side becomes `target`, the longer one keeps the
  // aspect ratio (truncated, as int() does).
  const int64_t target = p.resize_size(config.image_size);
  const int64_t h = x.size(2), w = x.size(3);
  const int64_t new_h = h <= w ? target : static_cast<int64_t>(static_cast<double>(target) * h / w);
  const int64_t new_w = h <= w ? static_cast<int64_t>(static_cast<double>(target) * w / h) : target;
  if (new_h != h || new_w != w) {
    namespace F = torch::nn::functional;
    auto options = F::InterpolateFuncOptions().size(std::vector<int64_t>{new_h, new_w}).align_corners(false).antialias(true);
    if (p.interpolation == "bicubic")
      options.mode(torch::kBicubic);
    else
      options.mode(torch::kBilinear);
    // An 8-bit image cannot overshoot: clamp bicubic's ringing as PIL's uint8 result does.
    x = F::interpolate(x.to(torch::kFloat32), options).clamp(0.0, 1.0);
  }
  // torchvision's center_crop: offsets round half to even (Python's round()).
  const int64_t size = config.image_size;
  if (x.size(2) < size || x.size(3) < size)
    throw UsageError("image of " + std::to_string(x.size(2)) + "×" + std::to_string(x.size(3)) +
                     " px is smaller than the crop of " + std::to_string(size) + " px");
  const auto top = static_cast<int64_t>(std::nearbyint((x.size(2) - size) / 2.0));
  const auto left = static_cast<int64_t>(std::nearbyint((x.size(3) - size) / 2.0));
  x = x.slice(2, top, top + size).slice(3, left, left + size);
  const auto options = torch::TensorOptions().dtype(x.dtype()).device(x.device());
  const auto mean = torch::tensor(std::vector<double>(p.mean.begin(), p.mean.end()), options).view({1, 3, 1, 1});
  const auto std = torch::tensor(std::vector<double>(p.std.begin(), p.std.end()), options).view({1, 3, 1, 1});
  if (x.size(1) != 3) throw UsageError("normalisation needs 3-channel images, got " + std::to_string(x.size(1)));
  return (x - mean) / std;
}

}  // namespace mumoe::nn
