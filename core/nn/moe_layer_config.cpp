#include "nn/moe_layer_config.h"

#include <algorithm>
#include <cmath>

#include "io/errors.h"

namespace mumoe::nn {
namespace {

struct RouterName {
  RouterKind kind;
  const char* name;
  const char* display;
};

constexpr RouterName kRouterNames[] = {
    {RouterKind::SoftmaxTokenChoice, "softmax-token-choice", "Softmax Token Choice"},
    {RouterKind::SinkhornTokenChoice, "sinkhorn-token-choice", "Sinkhorn Token Choice"},
    {RouterKind::SoftmaxExpertChoice, "softmax-expert-choice", "Softmax Expert Choice"},
    {RouterKind::SinkhornExpertChoice, "sinkhorn-expert-choice", "Sinkhorn Expert Choice"},
    {RouterKind::SparsityExpertChoice, "sparsity-expert-choice", "Sparsity-constrained Expert Choice"},
    {RouterKind::SoftMoE, "soft-moe", "Soft MoE"},
};

}  // namespace

std::string to_string(RouterKind kind) {
  for (const auto& r : kRouterNames)
    if (r.kind == kind) return r.name;
  return "unknown";
}

std::string display_name(RouterKind kind) {
  for (const auto& r : kRouterNames)
    if (r.kind == kind) return r.display;
  return "unknown router";
}

RouterKind parse_router_kind(const std::string& name) {
  std::string known;
  for (const auto& r : kRouterNames) {
    if (name == r.name) return r.kind;
    known += std::string(known.empty() ? "" : ", ") + r.name;
  }
  throw UsageError("unknown router '" + name + "' (one of " + known + ")");
}

bool is_token_choice(RouterKind kind) {
  return kind == RouterKind::SoftmaxTokenChoice || kind == RouterKind::SinkhornTokenChoice;
}

bool is_expert_choice(RouterKind kind) {
  return kind == RouterKind::SoftmaxExpertChoice || kind == RouterKind::SinkhornExpertChoice ||
         kind == RouterKind::SparsityExpertChoice;
}

void MoELayerConfig::validate() const {
  if (input_dim < 1 || output_dim < 1) throw UsageError("an MoE layer needs input and output sizes of at least 1");
  if (hidden_dim < 0) throw UsageError("the experts' hidden size must be 0 (linear experts) or positive");
  if (experts < 1) throw UsageError("an MoE layer needs at least one expert");
  if (is_token_choice(router) && (k < 1 || k > experts))
    throw UsageError("k (experts per token) must be in 1 … " + std::to_string(experts));
  if (!(capacity_factor > 0)) throw UsageError("the capacity factor must be positive");
  if (group_size < 0) throw UsageError("the group size must be 0 (the whole batch) or positive");
  if (sequence_groups && group_size < 1)
    throw UsageError("routing each sequence as a group needs the group size (the longest sequence) to be positive");
  if (slots_per_expert < 1) throw UsageError("Soft MoE needs at least one slot per expert");
  if (sinkhorn_iterations < 1) throw UsageError("Sinkhorn needs at least one iteration");
  if (!(sparsity_gamma > 0) || sparsity_iterations < 0)
    throw UsageError("the sparsity-constrained router needs γ > 0 and iterations ≥ 0");
}

int64_t MoELayerConfig::capacity(int64_t group_tokens) const {
  if (router == RouterKind::SoftMoE) return slots_per_expert;
  const double per_expert = static_cast<double>(group_tokens) / static_cast<double>(experts);
  if (is_token_choice(router))
    return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(capacity_factor * static_cast<double>(k) * per_expert)));
  return std::clamp<int64_t>(static_cast<int64_t>(std::ceil(capacity_factor * per_expert)), 1, std::max<int64_t>(1, group_tokens));
}

bool MoELayerConfig::is_causal() const { return why_not_causal().empty(); }

std::string MoELayerConfig::why_not_causal() const {
  if (router != RouterKind::SoftmaxTokenChoice)
    return display_name(router) + " is not causal: " +
           (router == RouterKind::SoftMoE ? std::string("each slot mixes every token of the sequence")
            : router == RouterKind::SinkhornTokenChoice
                ? std::string("the Sinkhorn plan normalises over every token of the group")
                : std::string("each expert ranks every token of the group, later ones included")) +
           "; only Softmax Token Choice with k = 1 routes a token from the tokens before it alone";
  if (k != 1)
    return "Softmax Token Choice with k = " + std::to_string(k) +
           " is not causal: a token's second choice is allocated after every token's first, later ones included; use k = 1";
  if (!sequence_groups) return "the layer routes groups of the batch, not each sequence on its own";
  return {};
}

int64_t MoELayerConfig::parameter_count() const {
  const int64_t router_parameters = input_dim * experts * (router == RouterKind::SoftMoE ? slots_per_expert : 1);
  const int64_t expert_parameters = hidden_dim > 0 ? input_dim * hidden_dim + hidden_dim + hidden_dim * output_dim + output_dim
                                                   : input_dim * output_dim + output_dim;
  return router_parameters + experts * expert_parameters;
}

}  // namespace mumoe::nn
