// MoELayer: a sparse or soft mixture-of-experts layer in the router study's unified form
// (moe_routing.h) — a router (one of the six) and n experts, each a linear map I → O or a
// two-layer MLP I → H → GELU → O, evaluated on the slots the routing tensors fill. It stands
// where a μMoE layer stands: a classifier head ([B, I] rows) or a transformer's MLP block
// ([B, T, I] tokens).
//
// Tokens and groups. Token- and expert-choice routers allocate buffer slots within a group of
// tokens: the rows of the batch (all B · T tokens, in order) are cut into groups of group_size
// (0: the whole batch is one group), so an answer depends on the group a token is in, as in every
// capacity-limited MoE. With sequence_groups (a language model's MLP) each sequence of [B, T, I]
// is one group instead, with the buffers of a full group_size-token group whatever T is. Soft MoE
// mixes the tokens of one input (the T tokens of a sequence; a head's row is a sequence of one
// token).
//
// The "expert coefficient" of token t for expert i, which every analysis reads, is its combine
// weight summed over the expert's slots, Σ_j C[t, i, j]: the softmax affinity where the token was
// taken (token and expert choice; 0 where it was not, e.g. dropped), the slot weights for Soft MoE.
// Ablating expert i removes its output: its combine weights are set to zero.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <vector>

#include "nn/moe_routing.h"
#include "nn/mumoe_block.h"

namespace mumoe::nn {

struct MoEOutput {
  torch::Tensor output;        ///< [B, O] or [B, T, O]
  torch::Tensor coefficients;  ///< [B, n] or [B, T, n]: Σ_j C[t, i, j] (see the header)
  int64_t tokens = 0;
  int64_t dropped_tokens = 0;  ///< tokens no expert received (capacity-limited routers)
  torch::Tensor aux_loss;      ///< the importance loss for Softmax Token Choice (study App. A), else 0
};

class MoELayerImpl : public torch::nn::Module {
 public:
  explicit MoELayerImpl(MoELayerConfig config);

  /// x: [B, I] or [B, T, I]. `ablated` experts contribute nothing (their combine weights are 0).
  MoEOutput forward(const torch::Tensor& x, const std::vector<int64_t>& ablated = {});
  /// forward() in the form of a μMoE block's output, so that callers treat both layer kinds
  /// alike: the coefficients are the one expert mode, ablation.experts_per_mode[0] is removed.
  BlockOutput forward_block(const torch::Tensor& x, const ExpertAblation& ablation = {});

  /// Exact ablation of every expert in one pass: the output of each token with each expert
  /// removed in turn, [tokens, n, O] (rows of x flattened as in forward). Routing does not depend
  /// on the experts' outputs, so removing expert i subtracts its slots' contribution
  /// Σ_j C[t, i, j] ỹ_ij from y_t — the same numbers as forward(x, {i}) for every i, without n
  /// passes. Memory: tokens × n × O.
  torch::Tensor outputs_without_each_expert(const torch::Tensor& x);

  /// Each expert's contribution to token `token` of every input x [B, T, I], [B, n, O]: Σ_j
  /// C[token, i, j] ỹ_ij, summing over i to forward(x).output[:, token] (in another order, so up to
  /// rounding). Routing does not depend on the experts' outputs, so token `token`'s output with
  /// experts S removed is that sum less S's rows — every ablation of one token from one routing
  /// pass (a ViT's class token after its last block). Token and expert choice need each input to
  /// be one routing group (a ViT's MLP: group_size = its tokens); throws UsageError otherwise.
  torch::Tensor contributions_at_token(const torch::Tensor& x, int64_t token);

  /// The routing tensors of one group of tokens [m, I] (token and expert choice), or of one
  /// input's tokens (Soft MoE).
  RoutingTensors route(const torch::Tensor& tokens);
  /// The experts on their slots: [n, p, I] → [n, p, O].
  torch::Tensor experts_on_slots(const torch::Tensor& slots);
  /// The token–expert affinity softmax(X W) [m, n] that combines (and, for the softmax routers,
  /// dispatches).
  torch::Tensor affinity(const torch::Tensor& tokens);

  const MoELayerConfig& config() const { return config_; }
  /// Router weights: W [I, n], or Soft MoE's slot parameters Φ [I, n · p].
  torch::Tensor router_weight() const { return router_; }

  void reset_parameters();

 private:
  /// route() that also hands back the softmax affinity (the importance loss needs it).
  RoutingTensors route(const torch::Tensor& tokens, torch::Tensor* affinity);
  /// Soft MoE on inputs [B, T, I]: the combine weights [B, T, n, p] and the slot outputs
  /// [n, B, p, O] — what forward and the one-pass ablation both start from.
  struct SoftMoEPass {
    torch::Tensor combine, slot_outputs;
  };
  SoftMoEPass soft_moe_pass(const torch::Tensor& tokens);
  /// The buffer capacity p for a group of `group_tokens` (config().capacity, or a full group's
  /// with sequence_groups).
  int64_t group_capacity(int64_t group_tokens) const;
  /// The tokens per routing group for an input x of `total` rows (checks sequence_groups' shape).
  int64_t routing_group(const torch::Tensor& x, int64_t total) const;
  /// The router's allocation for one group from its logits and softmax affinity [m, n].
  RoutingTensors allocate(const torch::Tensor& logits, const torch::Tensor& affinity, int64_t capacity) const;
  /// Token and expert choice over `groups` equal groups of `tokens` [G·m, I] at once: what the
  /// group-by-group loop computes, with one router matmul and one expert pass for every slot.
  struct EqualGroupsPass {
    torch::Tensor output, coefficients;  ///< [G·m, O], [G·m, n]
    int64_t dropped_tokens = 0;
    torch::Tensor aux_loss_sum;  ///< Σ over groups of the importance loss (Softmax Token Choice)
  };
  EqualGroupsPass equal_groups_pass(const torch::Tensor& tokens, int64_t groups, const torch::Tensor& keep);
  /// The routing of `groups` equal groups of `tokens` [G·m, I] and the experts on their slots:
  /// what equal_groups_pass and contributions_at_token both start from.
  struct EqualGroupsRouting {
    torch::Tensor logits, affinity;  ///< [G·m, n]
    torch::Tensor dispatch;          ///< [G, m, n, p], constants of the routing
    torch::Tensor slot_outputs;      ///< [n, G, p, O]
  };
  EqualGroupsRouting equal_groups_routing(const torch::Tensor& tokens, int64_t groups);

  MoELayerConfig config_;
  torch::Tensor router_;
  torch::Tensor w1_, b1_;  ///< [n, I, H|O], [n, H|O]
  torch::Tensor w2_, b2_;  ///< [n, H, O], [n, O] (two-layer experts only)
};
TORCH_MODULE(MoELayer);

/// An independent copy of `layer` as `dtype` on `device`, in eval mode (analysis evaluates
/// layers in float64 on such copies, leaving the model untouched).
MoELayer copy_moe_layer(const MoELayer& layer, torch::Dtype dtype, const torch::Device& device);

}  // namespace mumoe::nn
