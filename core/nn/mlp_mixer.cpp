#include "nn/mlp_mixer.h"

#include <torch/torch.h>

#include "io/errors.h"

namespace mumoe::nn {
namespace mixer_detail {

namespace tnn = torch::nn;

// The reference's FeedForward for `--layer MLP`: Sequential(Linear, GELU, Dropout, Linear,
// Dropout), so its Linears are children "0" and "3".
struct MixerMlpImpl : tnn::Module {
  MixerMlpImpl(int64_t outer, int64_t hidden) {
    fc1 = register_module("0", tnn::Linear(outer, hidden));
    fc2 = register_module("3", tnn::Linear(hidden, outer));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2->forward(torch::gelu(fc1->forward(x))); }
  tnn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(MixerMlp);

// PreNormResidual(dim, fn): x + fn(norm(x)). Token mixing runs fn on the transposed stream and
// keeps it at child "1" of a Sequential (the Rearranges at "0" and "2" have no tensors).
struct MixingImpl : tnn::Module {
  MixingImpl(bool token, int64_t width, int64_t outer, int64_t hidden, const LayerConfig* mumoe_config, double eps)
      : token(token) {
    norm = register_module("norm", tnn::LayerNorm(tnn::LayerNormOptions({width}).eps(eps)));
    std::shared_ptr<tnn::Module> fn = mumoe_config ? std::shared_ptr<tnn::Module>(MuMoEBlock(*mumoe_config).ptr())
                                                   : std::shared_ptr<tnn::Module>(MixerMlp(outer, hidden).ptr());
    if (mumoe_config) mumoe = MuMoEBlock(std::dynamic_pointer_cast<MuMoEBlockImpl>(fn));
    else mlp = MixerMlp(std::dynamic_pointer_cast<MixerMlpImpl>(fn));
    if (token) {
      auto sequential = std::make_shared<tnn::Module>();
      sequential->register_module("1", fn);
      register_module("fn", sequential);
    } else {
      register_module("fn", fn);
    }
  }
  // What the MLP reads: the normalised stream, [B, C, T] for token mixing.
  torch::Tensor mlp_input(const torch::Tensor& x) {
    const auto h = norm->forward(x);
    return token ? h.transpose(1, 2) : h;
  }
  torch::Tensor residual(const torch::Tensor& x, const ExpertAblation& ablation,
                         std::vector<torch::Tensor>* coefficients = nullptr) {
    const auto h = mlp_input(x);
    torch::Tensor y;
    if (mumoe) {
      auto out = mumoe->forward(h, ablation);
      if (coefficients) *coefficients = std::move(out.coefficients);
      y = out.output;
    } else {
      y = mlp->forward(h);
    }
    return x + (token ? y.transpose(1, 2) : y);
  }
  bool token;
  tnn::LayerNorm norm{nullptr};
  MuMoEBlock mumoe{nullptr};  ///< the μMoE block, or empty
  MixerMlp mlp{nullptr};      ///< the plain MLP, or empty
};
TORCH_MODULE(Mixing);

struct MixerBlockImpl : tnn::Module {
  MixerBlockImpl(const BackboneConfig& b, int64_t index) {
    const auto& m = b.mixer;
    const int64_t tokens = (b.image_size / m.patch_size) * (b.image_size / m.patch_size);
    const auto token_it = m.token_mumoe.find(index);
    const auto channel_it = m.channel_mumoe.find(index);
    token = register_module("0", Mixing(true, m.width, tokens, m.token_hidden,
                                        token_it == m.token_mumoe.end() ? nullptr : &token_it->second, m.norm_eps));
    channel = register_module("1", Mixing(false, m.width, m.width, m.channel_hidden,
                                          channel_it == m.channel_mumoe.end() ? nullptr : &channel_it->second,
                                          m.norm_eps));
  }
  Mixing token{nullptr}, channel{nullptr};
};
TORCH_MODULE(MixerBlock);

class MlpMixerImpl : public BackboneImpl, public TokenBackbone {
 public:
  explicit MlpMixerImpl(const BackboneConfig& b) : config_(b.mixer), channels_(b.in_channels) {
    const auto& m = config_;
    auto stem = std::make_shared<tnn::Module>();
    stem_ = stem->register_module("1", tnn::Linear(m.patch_size * m.patch_size * b.in_channels, m.width));
    register_module("stem", stem);
    blocks_ = register_module("mixer_blocks", tnn::ModuleList());
    for (int64_t i = 0; i < m.depth; ++i) blocks_->push_back(MixerBlock(b, i));
    auto head = std::make_shared<tnn::Module>();
    norm_ = head->register_module("0", tnn::LayerNorm(tnn::LayerNormOptions({m.width}).eps(m.norm_eps)));
    register_module("head", head);
  }

  torch::Tensor forward(const torch::Tensor& images) override {
    auto x = embed(images);
    for (int64_t k = 0; k < depth(); ++k) x = mixing(k)->residual(x, {});
    return pool(x);
  }

  TokenBackbone* tokens() override { return this; }
  int64_t depth() const override { return 2 * config_.depth; }
  int64_t prefix_tokens() const override { return 0; }
  bool pools_class_token() const override { return false; }
  bool mlp_rows_are_tokens(int64_t step) const override { return !mixing(step)->token; }
  MuMoEBlock mumoe_mlp(int64_t step) const override { return mixing(step)->mumoe; }
  MoELayer router_mlp(int64_t step) const override {
    mixing(step);  // range check
    return MoELayer(nullptr);
  }

  torch::Tensor embed(const torch::Tensor& images) override {
    const int64_t p = config_.patch_size;
    if (images.dim() != 4 || images.size(1) != channels_ || images.size(2) % p || images.size(3) % p)
      throw UsageError("the Mixer takes images [B, " + std::to_string(channels_) + ", H, W] with sides that are multiples of " +
                       std::to_string(p) + ", got " + c10::str(images.sizes()));
    const int64_t batch = images.size(0), rows = images.size(2) / p, cols = images.size(3) / p;
    // 'b c (h p1) (w p2) -> b (h w) (p1 p2 c)'
    const auto patches = images.reshape({batch, channels_, rows, p, cols, p})
                             .permute({0, 2, 4, 3, 5, 1})
                             .reshape({batch, rows * cols, p * p * channels_});
    return stem_->forward(patches);
  }

  torch::Tensor run_block(const torch::Tensor& stream, int64_t step, const ExpertAblation& ablation) override {
    return mlp_residual(stream, step, ablation);
  }
  torch::Tensor attention_residual(const torch::Tensor& stream, int64_t step) override {
    mixing(step);  // range check
    return stream;
  }
  torch::Tensor mlp_residual(const torch::Tensor& attended, int64_t step, const ExpertAblation& ablation) override {
    auto m = mixing(step);
    if (!ablation.empty() && !m->mumoe)
      throw UsageError(describe(step) + " is a plain MLP, not a μMoE block: nothing to ablate");
    return m->residual(attended, ablation);
  }
  torch::Tensor router_mlp_token_residuals(const torch::Tensor&, int64_t step, int64_t, const torch::Tensor&) override {
    throw UsageError(describe(step) + " is not a sparse or soft MoE layer");
  }
  torch::Tensor mlp_residual_keeping(const torch::Tensor& attended, int64_t step,
                                     std::vector<torch::Tensor>& coefficients) override {
    auto m = mixing(step);
    if (!m->mumoe) throw UsageError(describe(step) + " is a plain MLP, not a μMoE block");
    return m->residual(attended, {}, &coefficients);
  }
  std::vector<torch::Tensor> mlp_coefficients(const torch::Tensor& attended, int64_t step) override {
    auto m = mixing(step);
    if (!m->mumoe) throw UsageError(describe(step) + " is a plain MLP, not a μMoE block");
    return m->mumoe->coefficients(m->mlp_input(attended));
  }
  torch::Tensor pool(const torch::Tensor& stream) override { return norm_->forward(stream).mean(1); }

 private:
  std::string describe(int64_t step) const {
    return "block " + std::to_string(step / 2) + "'s " + (step % 2 ? "channel" : "token") + "-mixing MLP";
  }
  Mixing mixing(int64_t step) const {
    if (step < 0 || step >= depth())
      throw UsageError("the Mixer has mixing steps 0–" + std::to_string(depth() - 1) + " (2 per block), not " +
                       std::to_string(step));
    auto block = blocks_->ptr<MixerBlockImpl>(static_cast<size_t>(step / 2));
    return step % 2 ? block->channel : block->token;
  }

  MixerConfig config_;
  int64_t channels_;
  tnn::Linear stem_{nullptr};
  tnn::ModuleList blocks_{nullptr};
  tnn::LayerNorm norm_{nullptr};
};

}  // namespace mixer_detail

std::shared_ptr<BackboneImpl> make_mlp_mixer(const BackboneConfig& config) {
  config.validate();
  if (config.kind != BackboneKind::MlpMixer) throw UsageError("make_mlp_mixer: the backbone is a " + config.type_name());
  return std::make_shared<mixer_detail::MlpMixerImpl>(config);
}

}  // namespace mumoe::nn
