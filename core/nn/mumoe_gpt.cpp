#include "nn/mumoe_gpt.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "io/errors.h"
#include "nn/backbone_config.h"
#include "nn/module_state.h"
#include "nn/token_sampling.h"

namespace mumoe::nn {
namespace {

// nanoGPT's LayerNorm uses eps 1e-5, as does the μMoE block's input LayerNorm.
constexpr double kLayerNormEps = 1e-5;

GptLayerNorm layer_norm(int64_t width, bool bias) { return GptLayerNorm(width, bias); }

void require(bool ok, const std::string& message) {
  if (!ok) throw UsageError("invalid GPT configuration: " + message);
}

// Restores train()/eval() when generate() returns or throws.
class ModeGuard {
 public:
  explicit ModeGuard(torch::nn::Module& m) : module_(m), was_training_(m.is_training()) {}
  ~ModeGuard() { module_.train(was_training_); }

 private:
  torch::nn::Module& module_;
  bool was_training_;
};

}  // namespace

void GptConfig::validate() const {
  require(vocab_size > 0, "vocab_size must be positive");
  require(block_size > 0, "block_size must be positive");
  require(n_layer > 0, "n_layer must be positive");
  require(n_head > 0, "n_head must be positive");
  require(n_embd > 0, "n_embd must be positive");
  require(n_embd % n_head == 0, "n_head (" + std::to_string(n_head) + ") must divide n_embd (" +
                                    std::to_string(n_embd) + ")");
  require(experts > 0, "experts must be positive");
  require(dropout >= 0 && dropout < 1, "dropout must be in [0, 1)");
  for (size_t i = 0; i < dense_mlp_layers.size(); ++i)
    require(dense_mlp_layers[i] >= 0 && dense_mlp_layers[i] < n_layer &&
                (i == 0 || dense_mlp_layers[i] > dense_mlp_layers[i - 1]),
            "dense_mlp_layers must be distinct layers 0–" + std::to_string(n_layer - 1) + " in ascending order");
  require(dense_mlp_layers.empty() || !router_mlp, "a router GPT has no plain MLPs");
  if (router_mlp) {
    const auto& r = *router_mlp;
    r.validate();
    require(r.input_dim == n_embd && r.output_dim == n_embd,
            "the router MLP must map n_embd (" + std::to_string(n_embd) + ") to n_embd");
    require(r.experts == experts, "the router MLP has " + std::to_string(r.experts) + " experts, the GPT " +
                                      std::to_string(experts));
    require(r.group_size == block_size && r.sequence_groups,
            "the router MLP must route each sequence as a group of block_size (" + std::to_string(block_size) +
                ") tokens");
    require(r.is_causal(), r.why_not_causal());
    return;
  }
  if (factorization == Factorization::CP)
    require(cp_rank > 0, "cp_rank must be positive");
  else
    require(tr_ranks.size() == 3, "a TR GPT needs 3 ring ranks, got " + std::to_string(tr_ranks.size()));
  mlp_config().validate();
}

MoELayerConfig gpt_router_mlp_config(RouterKind router, int64_t n_embd, int64_t block_size, int64_t experts,
                                     int64_t expert_hidden, double capacity_factor) {
  // A transformer's router MLP (as the ViT's), routing each sequence with a full context's buffers.
  auto c = router_mlp_config(router, n_embd, experts, expert_hidden, block_size);
  c.k = 1;
  c.capacity_factor = capacity_factor;
  c.sequence_groups = true;
  c.validate();
  if (!c.is_causal()) throw UsageError("a GPT's MLP cannot be this router: " + c.why_not_causal());
  return c;
}

bool GptConfig::has_dense_mlp(int64_t layer) const {
  return std::binary_search(dense_mlp_layers.begin(), dense_mlp_layers.end(), layer);
}

LayerConfig GptConfig::mlp_config() const {
  LayerConfig c;
  c.factorization = factorization;
  c.input_dim = n_embd;
  c.output_dim = 4 * n_embd;
  c.second_dim = n_embd;
  c.expert_dims = {experts};
  if (factorization == Factorization::CP)
    c.cp_rank = cp_rank;
  else
    c.tr_ranks = tr_ranks;
  c.use_bias = true;
  c.gate_norm = GateNorm::LayerNorm;
  c.gate_activation = gate_activation;
  c.input_layer_norm = true;
  c.norm_eps = kLayerNormEps;
  return c;
}

nlohmann::json to_json(const GptConfig& c) {
  nlohmann::json j = {{"vocab_size", c.vocab_size}, {"block_size", c.block_size},
                      {"n_layer", c.n_layer},       {"n_head", c.n_head},
                      {"n_embd", c.n_embd},         {"experts", c.experts},
                      {"dropout", c.dropout}};
  if (!c.bias) j["bias"] = false;  // written only when false: files of before it stay as they were
  if (!c.dense_mlp_layers.empty()) j["dense_mlp_layers"] = c.dense_mlp_layers;
  if (c.router_mlp) {
    j["mlp"] = "router";
    return j;
  }
  j["factorization"] = to_string(c.factorization);
  j["gate_activation"] = to_string(c.gate_activation);
  if (c.factorization == Factorization::CP)
    j["cp_rank"] = c.cp_rank;
  else
    j["tr_ranks"] = c.tr_ranks;
  return j;
}

GptConfig gpt_config_from_json(const nlohmann::json& j, const std::optional<MoELayerConfig>& router_mlp) {
  if (!j.is_object()) throw UsageError("GPT configuration is not a JSON object");
  GptConfig c;
  const char* key = "";
  bool router = false;
  try {
    key = "mlp";
    const auto mlp = j.value(key, std::string("mumoe"));
    if (mlp != "mumoe" && mlp != "router")
      throw UsageError("GPT configuration: 'mlp' must be \"mumoe\" or \"router\", got \"" + mlp + "\"");
    router = mlp == "router";
  } catch (const nlohmann::json::exception&) {
    throw UsageError("GPT configuration: 'mlp' has the wrong type");
  }
  if (router != router_mlp.has_value())
    throw UsageError(router ? "GPT configuration: the router MLP's configuration is missing"
                            : "GPT configuration: a μMoE GPT was given a router MLP configuration");
  c.router_mlp = router_mlp;
  try {
    const std::initializer_list<std::pair<const char*, int64_t*>> sizes = {
        {"vocab_size", &c.vocab_size}, {"block_size", &c.block_size}, {"n_layer", &c.n_layer},
        {"n_head", &c.n_head},         {"n_embd", &c.n_embd},         {"experts", &c.experts}};
    for (const auto& [name, target] : sizes) {
      key = name;
      *target = j.at(name).get<int64_t>();
    }
    key = "dropout";
    c.dropout = j.value(key, c.dropout);
    key = "bias";
    c.bias = j.value(key, true);
    key = "dense_mlp_layers";
    c.dense_mlp_layers = j.value(key, std::vector<int64_t>{});
    if (router) {
      c.validate();
      return c;
    }
    key = "factorization";
    c.factorization = parse_factorization(j.value("factorization", std::string("CP")));
    if (c.factorization == Factorization::CP) {
      key = "cp_rank";
      c.cp_rank = j.at(key).get<int64_t>();
    } else {
      key = "tr_ranks";
      c.tr_ranks = j.at(key).get<std::vector<int64_t>>();
    }
    key = "gate_activation";
    c.gate_activation = parse_gate_activation(j.value(key, std::string("entmax15")));
  } catch (const nlohmann::json::exception&) {
    throw UsageError(std::string("GPT configuration: '") + key + "' is missing or has the wrong type");
  }
  c.validate();
  return c;
}

// ---------------------------------------------------------------------------------------------

GptLayerNormImpl::GptLayerNormImpl(int64_t width, bool bias) {
  weight = register_parameter("weight", torch::ones({width}));
  if (bias) this->bias = register_parameter("bias", torch::zeros({width}));
}

torch::Tensor GptLayerNormImpl::forward(const torch::Tensor& x) {
  return torch::layer_norm(x, {weight.size(0)}, weight, bias, kLayerNormEps);
}

void GptLayerNormImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  weight.fill_(1.0);
  if (bias.defined()) bias.zero_();
}

CausalSelfAttentionImpl::CausalSelfAttentionImpl(int64_t n_embd, int64_t n_head, double dropout, bool bias)
    : n_embd_(n_embd), n_head_(n_head), dropout_(dropout) {
  if (n_head <= 0 || n_embd % n_head != 0)
    throw UsageError("attention: n_head " + std::to_string(n_head) + " must divide n_embd " +
                     std::to_string(n_embd));
  c_attn_ = register_module("c_attn", torch::nn::Linear(torch::nn::LinearOptions(n_embd, 3 * n_embd).bias(bias)));
  c_proj_ = register_module("c_proj", torch::nn::Linear(torch::nn::LinearOptions(n_embd, n_embd).bias(bias)));
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x) {
  if (x.dim() != 3 || x.size(2) != n_embd_)
    throw UsageError("attention expects [B, T, " + std::to_string(n_embd_) + "], got " +
                     c10::str(x.sizes()));
  const int64_t batch = x.size(0), tokens = x.size(1), head_size = n_embd_ / n_head_;
  const auto qkv = c_attn_->forward(x).split(n_embd_, /*dim=*/2);
  // [B, T, C] → [B, heads, T, head_size]: heads become a batch dimension.
  auto heads = [&](const torch::Tensor& t) {
    return t.reshape({batch, tokens, n_head_, head_size}).transpose(1, 2);
  };
  const auto q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);
  auto att = q.matmul(k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(head_size)));
  // Position t must not see t' > t: those scores become −∞, i.e. weight 0 after the softmax.
  const auto future = torch::ones({tokens, tokens}, torch::dtype(torch::kBool).device(x.device())).triu(1);
  att = att.masked_fill(future, -std::numeric_limits<double>::infinity());
  att = torch::dropout(torch::softmax(att, -1), dropout_, is_training());
  const auto y = att.matmul(v).transpose(1, 2).contiguous().view({batch, tokens, n_embd_});
  return torch::dropout(c_proj_->forward(y), dropout_, is_training());
}

// ---------------------------------------------------------------------------------------------

GptBlockImpl::GptBlockImpl(const GptConfig& config, int64_t layer) : dropout_(config.dropout) {
  ln_1_ = register_module("ln_1", layer_norm(config.n_embd, config.bias));
  attn_ = register_module("attn", CausalSelfAttention(config.n_embd, config.n_head, config.dropout, config.bias));
  // nanoGPT's MLP module only wraps the μMoE block (its dropout has no parameters), so a plain
  // container gives the key "mlp.MuMoE_layer.…".
  if (config.router_mlp) {
    // nanoGPT's dense block: ln_2 before the MLP, which the router layer replaces.
    ln_2_ = register_module("ln_2", layer_norm(config.n_embd, config.bias));
    router_mlp_ = register_module("mlp", MoELayer(*config.router_mlp));
    return;
  }
  auto mlp = register_module("mlp", std::make_shared<torch::nn::Module>());
  if (config.has_dense_mlp(layer)) {
    // The reference's plain MLP carries its LayerNorm inside c_fc (its blocks have no ln_2).
    const auto C = config.n_embd;
    dense_fc_ = mlp->register_module(
        "c_fc", torch::nn::Sequential(layer_norm(C, config.bias),
                                      torch::nn::Linear(torch::nn::LinearOptions(C, 4 * C).bias(config.bias))));
    dense_proj_ = mlp->register_module("c_proj", torch::nn::Linear(torch::nn::LinearOptions(4 * C, C).bias(config.bias)));
    return;
  }
  mlp_ = mlp->register_module("MuMoE_layer", MuMoEBlock(config.mlp_config()));
}

torch::Tensor GptBlockImpl::attention_residual(const torch::Tensor& x) {
  return x + attn_->forward(ln_1_->forward(x));
}

BlockOutput GptBlockImpl::mlp_branch(const torch::Tensor& h, const ExpertAblation& ablation) {
  if (router_mlp_) return router_mlp_->forward_block(ln_2_->forward(h), ablation);
  if (dense_fc_) {
    if (!ablation.experts_per_mode.empty() && !ablation.experts_per_mode.front().empty())
      throw UsageError("a plain MLP has no experts to ablate");
    BlockOutput out;
    out.output = dense_proj_->forward(torch::gelu(dense_fc_->forward(h)));
    return out;
  }
  return mlp_->forward(h, ablation);
}

BlockOutput GptBlockImpl::mlp_residual(const torch::Tensor& h, const ExpertAblation& ablation) {
  auto out = mlp_branch(h, ablation);
  out.output = h + torch::dropout(out.output, dropout_, is_training());
  return out;
}

// ---------------------------------------------------------------------------------------------

MuMoEGptImpl::MuMoEGptImpl(GptConfig config) : config_(std::move(config)) {
  config_.validate();
  auto transformer = register_module("transformer", std::make_shared<torch::nn::Module>());
  wte_ = transformer->register_module("wte", torch::nn::Embedding(config_.vocab_size, config_.n_embd));
  wpe_ = transformer->register_module("wpe", torch::nn::Embedding(config_.block_size, config_.n_embd));
  for (int64_t i = 0; i < config_.n_layer; ++i) h_->push_back(GptBlock(config_, i));
  transformer->register_module("h", h_);
  ln_f_ = transformer->register_module("ln_f", layer_norm(config_.n_embd, config_.bias));
  // nanoGPT's initial draws, except for a copy whose every tensor is about to be replaced
  // (module_state.h: GPT-2's 124 M draws cost more than the copy itself).
  if (!SkipRandomInitialisation::active()) reset_parameters();
}

void MuMoEGptImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  wte_->weight.normal_(0.0, 0.02);
  wpe_->weight.normal_(0.0, 0.02);
  // GPT-2's scaled initialisation of the projections that write into the residual stream.
  const double proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(config_.n_layer));
  for (int64_t i = 0; i < config_.n_layer; ++i) {
    auto b = block(i);
    b->ln_1()->reset_parameters();
    b->attn()->c_attn()->weight.normal_(0.0, 0.02);
    if (config_.bias) b->attn()->c_attn()->bias.zero_();
    b->attn()->c_proj()->weight.normal_(0.0, proj_std);
    if (config_.bias) b->attn()->c_proj()->bias.zero_();
    if (b->has_router_mlp()) {
      // As nanoGPT initialises its dense MLP (c_fc, c_proj): N(0, 0.02), the projection into the
      // residual stream scaled down, biases 0 — not torch.nn.Linear's U(±1/√fan_in), whose
      // biases would add a large offset to routed tokens only (dropped ones get none).
      b->ln_2()->reset_parameters();
      auto params = b->router_mlp()->named_parameters(/*recurse=*/false);
      const bool two_layer = b->router_mlp()->config().hidden_dim > 0;
      for (auto& p : params) {
        const auto& key = p.key();
        if (key == "experts_b1" || key == "experts_b2") p.value().zero_();
        else if (key == "router" || (key == "experts_w1" && two_layer)) p.value().normal_(0.0, 0.02);
        else p.value().normal_(0.0, proj_std);  // the layer writing into the residual stream
      }
    } else if (b->has_dense_mlp()) {
      // nanoGPT's plain MLP: N(0, 0.02), the projection into the residual stream scaled down.
      for (auto& p : b->named_parameters()) {
        if (p.key().rfind("mlp.", 0) != 0) continue;
        if (p.key().find(".bias") != std::string::npos) p.value().zero_();
        else if (p.key() == "mlp.c_fc.0.weight") p.value().fill_(1.0);
        else p.value().normal_(0.0, p.key() == "mlp.c_proj.weight" ? proj_std : 0.02);
      }
    } else {
      b->mlp()->reset_parameters();
    }
  }
  ln_f_->reset_parameters();
}

void MuMoEGptImpl::check_layer(int64_t layer) const {
  if (layer < 0 || layer >= config_.n_layer)
    throw UsageError("layer " + std::to_string(layer) + " does not exist: the GPT has layers 0–" +
                     std::to_string(config_.n_layer - 1));
}

GptBlock MuMoEGptImpl::block(int64_t layer) const {
  check_layer(layer);
  return GptBlock(h_->ptr<GptBlockImpl>(static_cast<size_t>(layer)));
}

torch::Tensor MuMoEGptImpl::embed(const torch::Tensor& idx) {
  if (idx.dim() != 2 || !at::isIntegralType(idx.scalar_type(), /*includeBool=*/false))
    throw UsageError("the GPT expects integer token ids [B, T], got " +
                     std::string(c10::toString(idx.scalar_type())) + " " + c10::str(idx.sizes()));
  const int64_t tokens = idx.size(1);
  if (tokens < 1 || tokens > config_.block_size)
    throw UsageError("the GPT reads 1–" + std::to_string(config_.block_size) + " tokens at a time, got " +
                     std::to_string(tokens));
  if (idx.numel() > 0) {
    const auto lo = idx.min().item<int64_t>(), hi = idx.max().item<int64_t>();
    if (lo < 0 || hi >= config_.vocab_size)
      throw UsageError("token id " + std::to_string(lo < 0 ? lo : hi) + " is outside the vocabulary (0–" +
                       std::to_string(config_.vocab_size - 1) + ")");
  }
  const auto ids = idx.to(wte_->weight.device(), torch::kLong);
  const auto positions = torch::arange(tokens, torch::dtype(torch::kLong).device(ids.device()));
  return torch::dropout(wte_->forward(ids) + wpe_->forward(positions), config_.dropout, is_training());
}

GptOutput MuMoEGptImpl::forward(const torch::Tensor& idx, const std::vector<ExpertAblation>& ablation,
                                bool keep_mlp_inputs) {
  if (static_cast<int64_t>(ablation.size()) > config_.n_layer)
    throw UsageError("ablation names " + std::to_string(ablation.size()) + " layers but the GPT has " +
                     std::to_string(config_.n_layer));
  GptOutput out;
  auto x = embed(idx);
  out.aux_loss = torch::zeros({}, x.options());
  for (int64_t l = 0; l < config_.n_layer; ++l) {
    auto b = block(l);
    const auto h = b->attention_residual(x);
    if (keep_mlp_inputs) out.mlp_inputs.push_back(h);
    auto mlp = b->mlp_residual(h, l < static_cast<int64_t>(ablation.size()) ? ablation[l] : ExpertAblation{});
    x = mlp.output;
    out.coefficients.push_back(mlp.coefficients.empty() ? torch::Tensor() : mlp.coefficients.front());
    if (mlp.aux_loss.defined()) out.aux_loss = out.aux_loss + mlp.aux_loss;
  }
  out.aux_loss = out.aux_loss / static_cast<double>(config_.n_layer);
  // lm_head shares wte's weight (weight tying) and has no bias.
  out.logits = torch::nn::functional::linear(ln_f_->forward(x), wte_->weight);
  return out;
}

torch::Tensor MuMoEGptImpl::residual_before_mlp(const torch::Tensor& idx, int64_t layer,
                                                const std::vector<ExpertAblation>& ablation) {
  check_layer(layer);
  auto x = embed(idx);
  for (int64_t l = 0;; ++l) {
    auto b = block(l);
    const auto h = b->attention_residual(x);
    if (l == layer) return h;
    x = b->mlp_residual(h, l < static_cast<int64_t>(ablation.size()) ? ablation[l] : ExpertAblation{}).output;
  }
}

std::vector<int32_t> MuMoEGptImpl::generate(const std::vector<int32_t>& prompt, int64_t max_new_tokens,
                                            double temperature, int64_t top_k, uint64_t seed,
                                            const TokenProgress& progress) {
  ModeGuard mode(*this);
  eval();
  torch::NoGradGuard no_grad;
  SamplingSettings settings;
  settings.vocab_size = config_.vocab_size;
  settings.sampled_vocabulary = sampled_vocabulary_;
  settings.block_size = config_.block_size;
  settings.device = wte_->weight.device();
  settings.max_new_tokens = max_new_tokens;
  settings.temperature = temperature;
  settings.top_k = top_k;
  settings.seed = seed;
  settings.progress = progress;
  return sample_continuation([this](const torch::Tensor& idx) { return forward(idx).logits; }, prompt, settings);
}

std::string gpt_mlp_prefix(int64_t layer) {
  return "transformer.h." + std::to_string(layer) + ".mlp.MuMoE_layer.";
}

std::string gpt_mlp_prefix(const GptConfig& config, int64_t layer) {
  return config.router_mlp ? "transformer.h." + std::to_string(layer) + ".mlp." : gpt_mlp_prefix(layer);
}

std::string gpt_mlp_layer_name(const GptConfig& config, int64_t layer) {
  auto name = gpt_mlp_prefix(config, layer);
  name.pop_back();
  return name;
}

}  // namespace mumoe::nn
