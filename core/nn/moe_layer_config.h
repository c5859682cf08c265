// The configuration of a sparse or soft MoE layer (moe_layer.h) and the names of its routers
// (moe_routing.h), in plain C++ (no LibTorch) so that manifests, summaries and UI code can hold
// and show them without torch headers.
#pragma once

#include <cstdint>
#include <string>

namespace mumoe::nn {

enum class RouterKind {
  SoftmaxTokenChoice,
  SinkhornTokenChoice,
  SoftmaxExpertChoice,
  SinkhornExpertChoice,
  SparsityExpertChoice,
  SoftMoE,
};

/// "softmax-token-choice", "sinkhorn-token-choice", "softmax-expert-choice",
/// "sinkhorn-expert-choice", "sparsity-expert-choice", "soft-moe".
std::string to_string(RouterKind kind);
/// Throws UsageError listing the names for an unknown one.
RouterKind parse_router_kind(const std::string& name);
bool is_token_choice(RouterKind kind);
bool is_expert_choice(RouterKind kind);

struct MoELayerConfig {
  RouterKind router = RouterKind::SoftmaxTokenChoice;
  int64_t input_dim = 0;
  int64_t hidden_dim = 0;  ///< 0: each expert is linear I → O; else I → H → GELU → O
  int64_t output_dim = 0;
  int64_t experts = 8;
  int64_t k = 1;                 ///< token choice: experts per token
  double capacity_factor = 1.0;  ///< c: slots per expert = ceil(c · k · g / n) (token choice),
                                 ///< ceil(c · g / n) (expert choice) for a group of g tokens
  int64_t group_size = 0;        ///< tokens per routing group; 0 = the whole batch
  /// Route each sequence of a [B, T, I] input as its own group, whatever T (≤ group_size), with
  /// the capacity of a full group_size-token group: a language model's MLP, where a token's
  /// routing must not depend on the tokens after it nor on the other sequences of the batch
  /// (is_causal). Needs group_size > 0.
  bool sequence_groups = false;
  int64_t slots_per_expert = 1;  ///< Soft MoE's p
  int64_t sinkhorn_iterations = 20;
  double sparsity_gamma = 1.0;        ///< γ of the sparsity-constrained plan
  int64_t sparsity_iterations = 50;

  /// Throws UsageError naming the first bad field.
  void validate() const;
  /// The buffer capacity p for a group of `group_tokens` (Soft MoE: slots_per_expert).
  int64_t capacity(int64_t group_tokens) const;
  /// Trainable parameters: the router and the experts.
  int64_t parameter_count() const;
  /// Whether a token's routing depends only on itself and the tokens before it in its own
  /// sequence, so that the layer can stand in an autoregressive model: Softmax Token Choice with
  /// k = 1 and sequence_groups (Algorithm 1 fills the buffers in token order, and the capacity
  /// does not depend on the sequence's length). Every other router reads later tokens: Sinkhorn
  /// plans and expert-choice allocations normalise or rank over the whole group, k > 1 fills the
  /// second choices after every token's first, and Soft MoE's slots mix the whole sequence.
  bool is_causal() const;
  /// Why is_causal() is false, in one sentence for an error message ("" when it is true).
  std::string why_not_causal() const;
};

/// "Soft MoE", "Softmax Token Choice", … : the router's name as the study writes it.
std::string display_name(RouterKind kind);

}  // namespace mumoe::nn
