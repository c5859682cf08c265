// A small nanoGPT whose MLP blocks are μMoE two-layer blocks (the language models of the paper,
// spec §2): token + position embeddings, n_layer blocks `x = x + attn(ln_1(x)); x = x + mlp(x)`
// (no ln_2: the μMoE block has its own input LayerNorm and its gates see the raw residual
// stream), a final LayerNorm and an lm_head tied to the token embedding.
//
// Module names equal nanoGPT's state-dict keys (transformer.wte.weight, transformer.h.{i}.ln_1.*,
// transformer.h.{i}.attn.c_attn.*, transformer.h.{i}.mlp.MuMoE_layer.*, transformer.ln_f.*), so
// a checkpoint of the reference code maps onto it key for key.
//
// Router MLPs (GptConfig::router_mlp): every block's MLP may instead be a sparse MoE layer of the
// router study (nn/moe_layer.h) after nanoGPT's own ln_2, `x = x + dropout(moe(ln_2(x)))`, under
// transformer.h.{i}.ln_2.* and transformer.h.{i}.mlp.{router, experts_w1, …}. A language model
// must stay causal — the logits at position t may read tokens ≤ t only, or training would let it
// see the token it predicts — so only a causal router is accepted (MoELayerConfig::is_causal):
// Softmax Token Choice with k = 1, each sequence its own routing group with the buffers of a full
// block_size context. Expert choice, Sinkhorn and Soft MoE read later tokens and are refused. lm_head.weight is the one
// exception: LibTorch's parameters() does not de-duplicate shared tensors (an optimizer would
// update a registered tied weight twice per step), so the module registers only
// transformer.wte.weight and model::gpt_state_dict() (model/gpt_file.h) adds lm_head.weight, as
// PyTorch's state_dict does.
#pragma once

#include <nlohmann/json.hpp>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nn/expert_ablation.h"
#include "nn/layer_config.h"
#include "nn/moe_layer.h"
#include "nn/mumoe_block.h"
#include "nn/token_sampling.h"

namespace mumoe::nn {

struct GptConfig {
  int64_t vocab_size = 256;  ///< V (256: the byte tokenizer)
  int64_t block_size = 128;  ///< context length: the most tokens one forward pass sees
  int64_t n_layer = 4;
  int64_t n_head = 4;        ///< must divide n_embd
  int64_t n_embd = 128;      ///< C
  int64_t experts = 32;      ///< N, experts per MLP block (hierarchy 1)
  /// How each MLP block's weight tensors are factorised: CP with cp_rank (the default), or TR
  /// with tr_ranks (3 ring ranks; the reference's TRμMoE GPT uses {4, 4, r}).
  Factorization factorization = Factorization::CP;
  int64_t cp_rank = 128;
  std::vector<int64_t> tr_ranks;
  double dropout = 0.1;  ///< embeddings, attention weights, attention output, MLP output
  /// nanoGPT's `bias`: biases in the attention's Linears and the LayerNorms (ln_1, ln_2, ln_f).
  /// False is the default of nanoGPT's train.py; the μMoE block's own input LayerNorm and bias
  /// row are there either way (the reference's MuMoE layer).
  bool bias = true;
  /// Layers whose MLP is nanoGPT's plain one (the reference's `layer_type` linear: mlp.c_fc =
  /// LayerNorm + Linear C → 4C, GELU, mlp.c_proj 4C → C) instead of a μMoE block; ascending. A
  /// GPT whose every MLP is plain has nothing to analyse but runs (evaluate, generate).
  std::vector<int64_t> dense_mlp_layers;
  bool has_dense_mlp(int64_t layer) const;
  GateActivationKind gate_activation = GateActivationKind::Entmax15;
  /// When set, every MLP block is this router layer after ln_2 instead of a μMoE block (see the
  /// header); make it with gpt_router_mlp_config. Its experts must equal `experts`, it must map
  /// n_embd → n_embd, route each sequence as a group of block_size tokens and be causal.
  /// factorization, cp_rank, tr_ranks and gate_activation then describe nothing.
  std::optional<MoELayerConfig> router_mlp;

  /// Throws UsageError naming the first bad field.
  void validate() const;
  bool has_router_mlp() const { return router_mlp.has_value(); }

  /// The configuration of every MLP block: input C → hidden 4C → C, LayerNorm gating, input
  /// LayerNorm, per-expert bias (the reference's MuMoE(..., apply_ln=True, normalization='ln')).
  LayerConfig mlp_config() const;
};

/// The sizes and, for a μMoE GPT, its blocks' factorisation. A router GPT is marked
/// {"mlp": "router"}: its router configuration is stored with the manifest's layers, like every
/// router layer's (model/gpt_file.h), and handed back to gpt_config_from_json.
nlohmann::json to_json(const GptConfig& config);
/// Throws UsageError naming a missing or mistyped field, or the first invalid value. A router
/// GPT's json needs `router_mlp` (the layers' configuration), a μMoE GPT's must not get one.
GptConfig gpt_config_from_json(const nlohmann::json& json,
                               const std::optional<MoELayerConfig>& router_mlp = std::nullopt);

/// The router MLP of a GPT of width `n_embd` and context `block_size`: `router` (which must be
/// causal: Softmax Token Choice) with k = 1, `experts` two-layer experts n_embd → expert_hidden →
/// n_embd, buffers of capacity_factor · block_size / experts slots per sequence. Throws
/// UsageError (why_not_causal) for any other router.
MoELayerConfig gpt_router_mlp_config(RouterKind router, int64_t n_embd, int64_t block_size, int64_t experts,
                                     int64_t expert_hidden, double capacity_factor = 1.0);

/// nanoGPT's LayerNorm: a weight and, with `bias`, a bias ("weight", "bias"); eps 1e-5. LibTorch
/// 1.13's LayerNorm cannot leave out the bias alone.
class GptLayerNormImpl : public torch::nn::Module {
 public:
  GptLayerNormImpl(int64_t width, bool bias);
  torch::Tensor forward(const torch::Tensor& x);
  /// weight 1, bias 0.
  void reset_parameters();

  torch::Tensor weight;
  torch::Tensor bias;  ///< undefined without a bias
};
TORCH_MODULE(GptLayerNorm);

/// nanoGPT's CausalSelfAttention, written out (no fused kernel: LibTorch 1.13 has none):
/// q, k, v from one c_attn projection, per head softmax(q kᵀ/√d + causal mask) v, c_proj.
class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  CausalSelfAttentionImpl(int64_t n_embd, int64_t n_head, double dropout, bool bias = true);
  /// x [B, T, C] → [B, T, C]. Position t attends to positions ≤ t only.
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Linear c_attn() const { return c_attn_; }
  torch::nn::Linear c_proj() const { return c_proj_; }
  int64_t n_head() const { return n_head_; }

 private:
  int64_t n_embd_;
  int64_t n_head_;
  double dropout_;
  torch::nn::Linear c_attn_{nullptr};
  torch::nn::Linear c_proj_{nullptr};
};
TORCH_MODULE(CausalSelfAttention);

/// One transformer block ("transformer.h.{i}"): ln_1, attn, and mlp.MuMoE_layer — or ln_2 and a
/// router MLP "mlp".
class GptBlockImpl : public torch::nn::Module {
 public:
  /// Block `layer` of a GPT of `config` (its MLP: μMoE, router or plain, as config says).
  explicit GptBlockImpl(const GptConfig& config, int64_t layer = 0);

  /// x + attn(ln_1(x)): the residual stream the MLP block reads.
  torch::Tensor attention_residual(const torch::Tensor& x);
  /// h + dropout(mlp(h)) for h = attention_residual(x), with the MLP's output.
  BlockOutput mlp_residual(const torch::Tensor& h, const ExpertAblation& ablation = {});
  /// The MLP branch alone, without the residual and the dropout: the μMoE block's output for h,
  /// or the router layer's for ln_2(h). Its aux_loss is the router's load-balancing loss.
  BlockOutput mlp_branch(const torch::Tensor& h, const ExpertAblation& ablation = {});

  GptLayerNorm ln_1() const { return ln_1_; }
  CausalSelfAttention attn() const { return attn_; }
  /// The μMoE block registered as "mlp.MuMoE_layer" (empty in a router GPT).
  MuMoEBlock mlp() const { return mlp_; }
  /// The router MLP registered as "mlp" and its LayerNorm "ln_2" (empty in a μMoE GPT).
  MoELayer router_mlp() const { return router_mlp_; }
  /// True when the MLP is nanoGPT's plain one (GptConfig::dense_mlp_layers): mlp_branch then
  /// returns no coefficients.
  bool has_dense_mlp() const { return !dense_fc_.is_empty(); }
  GptLayerNorm ln_2() const { return ln_2_; }
  bool has_router_mlp() const { return !router_mlp_.is_empty(); }

 private:
  double dropout_;
  GptLayerNorm ln_1_{nullptr};
  CausalSelfAttention attn_{nullptr};
  MuMoEBlock mlp_{nullptr};
  GptLayerNorm ln_2_{nullptr};
  MoELayer router_mlp_{nullptr};
  torch::nn::Sequential dense_fc_{nullptr};  ///< "mlp.c_fc": LayerNorm "0", Linear "1"
  torch::nn::Linear dense_proj_{nullptr};    ///< "mlp.c_proj"
};
TORCH_MODULE(GptBlock);

/// What MuMoEGpt::forward returns.
struct GptOutput {
  torch::Tensor logits;  ///< [B, T, V]
  /// Per layer, the MLP block's expert coefficients [B, T, N] as used (ablated experts are 0);
  /// undefined for a plain MLP.
  std::vector<torch::Tensor> coefficients;
  /// Per layer, the MLP block's input (the residual stream after attention) [B, T, C]; filled
  /// only when forward is asked to keep them.
  std::vector<torch::Tensor> mlp_inputs;
  /// The router MLPs' load-balancing losses, averaged over the layers (0 for μMoE blocks and
  /// routers without one); training adds it with its weight.
  torch::Tensor aux_loss;
};

class MuMoEGptImpl : public torch::nn::Module {
 public:
  explicit MuMoEGptImpl(GptConfig config);

  /// idx: integer token ids [B, T] with 1 ≤ T ≤ block_size and 0 ≤ id < vocab_size (checked;
  /// UsageError otherwise). ablation_per_layer[l] removes experts of layer l's MLP block; it may
  /// be shorter than n_layer (missing layers: no ablation). Dropout is active in train() mode.
  GptOutput forward(const torch::Tensor& idx,
                    const std::vector<ExpertAblation>& ablation_per_layer = {},
                    bool keep_mlp_inputs = false);

  /// The input of layer `layer`'s MLP block for idx (what analysis caches) [B, T, C]; the same
  /// tensor forward() would feed it, with the same ablations of the layers below.
  torch::Tensor residual_before_mlp(const torch::Tensor& idx, int64_t layer,
                                    const std::vector<ExpertAblation>& ablation_per_layer = {});

  /// Samples max_new_tokens continuation tokens of `prompt` (non-empty) and returns them (without
  /// the prompt). The context is cropped to the last block_size tokens. temperature 0 picks the
  /// most likely token; top_k > 0 samples among the k most likely only. Runs in eval mode
  /// without gradients (the module's mode is restored) and is deterministic for a seed: the
  /// draws come from a SplitMix64 generator on CPU-side probabilities, not from torch's RNG.
  /// `progress` (optional) follows each token and can cancel (token_sampling.h).
  std::vector<int32_t> generate(const std::vector<int32_t>& prompt, int64_t max_new_tokens,
                                double temperature = 1.0, int64_t top_k = 0, uint64_t seed = 0,
                                const TokenProgress& progress = {});

  /// The ids generate() may draw: below `tokens` (the tokenizer's vocabulary, where the
  /// embedding has padding rows past it); 0 (the default): every row.
  void set_sampled_vocabulary(int64_t tokens) { sampled_vocabulary_ = tokens; }
  int64_t sampled_vocabulary() const { return sampled_vocabulary_; }

  /// Re-initialises every parameter as nanoGPT does: Linear and Embedding weights N(0, 0.02),
  /// biases 0, c_proj weights N(0, 0.02/√(2·n_layer)), LayerNorms (1, 0); the μMoE blocks as
  /// in spec §1 (gating 0). Uses torch's global generator (seed it with torch::manual_seed).
  void reset_parameters();

  const GptConfig& config() const { return config_; }
  int64_t n_layer() const { return config_.n_layer; }
  /// Block `layer` ("transformer.h.{layer}"); throws UsageError when out of range.
  GptBlock block(int64_t layer) const;
  torch::nn::Embedding wte() const { return wte_; }
  torch::nn::Embedding wpe() const { return wpe_; }
  GptLayerNorm ln_f() const { return ln_f_; }

 private:
  torch::Tensor embed(const torch::Tensor& idx);
  void check_layer(int64_t layer) const;

  GptConfig config_;
  int64_t sampled_vocabulary_ = 0;
  torch::nn::Embedding wte_{nullptr};
  torch::nn::Embedding wpe_{nullptr};
  torch::nn::ModuleList h_;
  GptLayerNorm ln_f_{nullptr};
};
TORCH_MODULE(MuMoEGpt);

/// The state-dict key of layer `layer`'s μMoE block prefix: "transformer.h.{layer}.mlp.MuMoE_layer.".
std::string gpt_mlp_prefix(int64_t layer);
/// The prefix of layer `layer`'s MLP in a GPT of `config`: gpt_mlp_prefix(layer), or
/// "transformer.h.{layer}.mlp." for a router MLP. Without the '.', the layer's name in manifests
/// and the cache.
std::string gpt_mlp_prefix(const GptConfig& config, int64_t layer);
/// That prefix without its final '.': the layer's name in manifests, the cache and --layer.
std::string gpt_mlp_layer_name(const GptConfig& config, int64_t layer);

}  // namespace mumoe::nn
