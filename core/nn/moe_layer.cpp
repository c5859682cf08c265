#include "nn/moe_layer.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "io/errors.h"
#include "nn/module_state.h"

namespace mumoe::nn {

MoELayerImpl::MoELayerImpl(MoELayerConfig config) : config_(std::move(config)) {
  config_.validate();
  const auto& c = config_;
  const int64_t first_out = c.hidden_dim > 0 ? c.hidden_dim : c.output_dim;
  router_ = register_parameter("router", torch::empty({c.input_dim, c.experts * (c.router == RouterKind::SoftMoE ? c.slots_per_expert : 1)}));
  w1_ = register_parameter("experts_w1", torch::empty({c.experts, c.input_dim, first_out}));
  b1_ = register_parameter("experts_b1", torch::empty({c.experts, first_out}));
  if (c.hidden_dim > 0) {
    w2_ = register_parameter("experts_w2", torch::empty({c.experts, c.hidden_dim, c.output_dim}));
    b2_ = register_parameter("experts_b2", torch::empty({c.experts, c.output_dim}));
  }
  if (!SkipRandomInitialisation::active()) reset_parameters();
}

void MoELayerImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  const auto& c = config_;
  // A random router: a zero one would give every token equal affinities, and the tie rule
  // would send them all to expert 0.
  router_.normal_(0.0, 1.0 / std::sqrt(static_cast<double>(c.input_dim)));
  // Each expert as torch.nn.Linear initialises itself: U(±1/√fan_in).
  const double bound1 = 1.0 / std::sqrt(static_cast<double>(c.input_dim));
  w1_.uniform_(-bound1, bound1);
  b1_.uniform_(-bound1, bound1);
  if (c.hidden_dim > 0) {
    const double bound2 = 1.0 / std::sqrt(static_cast<double>(c.hidden_dim));
    w2_.uniform_(-bound2, bound2);
    b2_.uniform_(-bound2, bound2);
  }
}

torch::Tensor MoELayerImpl::affinity(const torch::Tensor& tokens) { return torch::softmax(tokens.matmul(router_), 1); }

RoutingTensors MoELayerImpl::route(const torch::Tensor& tokens) { return route(tokens, nullptr); }

RoutingTensors MoELayerImpl::route(const torch::Tensor& tokens, torch::Tensor* affinity_out) {
  const auto& c = config_;
  const auto logits = tokens.matmul(router_);
  if (c.router == RouterKind::SoftMoE) return soft_moe_routing(logits, c.experts);
  const auto a = torch::softmax(logits, 1);
  if (affinity_out) *affinity_out = a;
  return allocate(logits, a, group_capacity(tokens.size(0)));
}

int64_t MoELayerImpl::group_capacity(int64_t group_tokens) const {
  const auto& c = config_;
  if (!c.sequence_groups) return c.capacity(group_tokens);
  // A sequence's buffers are those of a full group_size-token group, so that a token's routing
  // does not depend on how many tokens follow it. No expert can take more tokens than a group
  // holds (expert choice: than this sequence holds), so larger buffers would only cost memory.
  const auto p = std::min(c.capacity(c.group_size), c.group_size);
  return is_expert_choice(c.router) ? std::min(p, group_tokens) : p;
}

int64_t MoELayerImpl::routing_group(const torch::Tensor& x, int64_t total) const {
  const auto& c = config_;
  if (!c.sequence_groups) return c.group_size > 0 ? c.group_size : std::max<int64_t>(1, total);
  if (x.dim() != 3 || x.size(1) > c.group_size)
    throw UsageError("this MoE layer routes each sequence of at most " + std::to_string(c.group_size) +
                     " tokens on its own and takes [B, T ≤ " + std::to_string(c.group_size) + ", " +
                     std::to_string(c.input_dim) + "], got " + c10::str(x.sizes()));
  return std::max<int64_t>(1, x.size(1));
}

MoELayerImpl::SoftMoEPass MoELayerImpl::soft_moe_pass(const torch::Tensor& tokens) {
  const auto& c = config_;
  const int64_t b = tokens.size(0), t = tokens.size(1), n = c.experts, p = c.slots_per_expert;
  const auto logits = tokens.matmul(router_);                           // [B, T, n·p]
  const auto dispatch = torch::softmax(logits, 1).view({b, t, n, p});  // over each input's tokens
  const auto combine = torch::softmax(logits, 2).view({b, t, n, p});   // over every slot
  const auto slots = torch::einsum("btnp,bti->nbpi", {dispatch, tokens}).reshape({n, b * p, c.input_dim});
  return {combine, experts_on_slots(slots).view({n, b, p, c.output_dim})};
}

BlockOutput MoELayerImpl::forward_block(const torch::Tensor& x, const ExpertAblation& ablation) {
  auto out = forward(x, ablation.experts_per_mode.empty() ? std::vector<int64_t>{} : ablation.experts_per_mode.front());
  return {out.output, {out.coefficients}, out.aux_loss, out.dropped_tokens};
}

torch::Tensor MoELayerImpl::experts_on_slots(const torch::Tensor& slots) {
  auto h = torch::baddbmm(b1_.unsqueeze(1), slots, w1_);
  if (config_.hidden_dim == 0) return h;
  return torch::baddbmm(b2_.unsqueeze(1), torch::gelu(h), w2_);
}

RoutingTensors MoELayerImpl::allocate(const torch::Tensor& logits, const torch::Tensor& affinity, int64_t capacity) const {
  const auto& c = config_;
  switch (c.router) {
    case RouterKind::SoftmaxTokenChoice: return token_choice_allocation(affinity, affinity, capacity, c.k);
    case RouterKind::SinkhornTokenChoice:
      return token_choice_allocation(sinkhorn_plan(logits, c.sinkhorn_iterations), affinity, capacity, c.k);
    case RouterKind::SoftmaxExpertChoice: return expert_choice_allocation(affinity, affinity, capacity);
    case RouterKind::SinkhornExpertChoice:
      return expert_choice_allocation(sinkhorn_plan(logits, c.sinkhorn_iterations), affinity, capacity);
    case RouterKind::SparsityExpertChoice:
      return expert_choice_allocation(
          sparsity_constrained_plan(affinity, capacity, c.sparsity_gamma, c.sparsity_iterations), affinity, capacity);
    case RouterKind::SoftMoE: break;
  }
  throw UsageError("allocate() is for token- and expert-choice routers");
}

MoELayerImpl::EqualGroupsRouting MoELayerImpl::equal_groups_routing(const torch::Tensor& tokens, int64_t groups) {
  const auto& c = config_;
  const int64_t n = c.experts, m = tokens.size(0) / groups, p = group_capacity(m);
  EqualGroupsRouting r;
  r.logits = tokens.matmul(router_);  // [G·m, n]
  r.affinity = torch::softmax(r.logits, 1);
  // The dispatch tensors are constants of the routing (allocation loops over detached
  // affinities, as in route()); gradients reach the router through the combine weights.
  const auto logits_d = r.logits.detach(), a_d = r.affinity.detach();
  std::vector<torch::Tensor> dispatch;
  dispatch.reserve(static_cast<size_t>(groups));
  for (int64_t g = 0; g < groups; ++g)
    dispatch.push_back(allocate(logits_d.slice(0, g * m, (g + 1) * m), a_d.slice(0, g * m, (g + 1) * m), p).dispatch);
  r.dispatch = torch::stack(dispatch).to(r.affinity.options());  // [G, m, n, p]
  const auto x = tokens.view({groups, m, c.input_dim});
  const auto slots = torch::einsum("gmnp,gmi->ngpi", {r.dispatch, x}).reshape({n, groups * p, c.input_dim});
  r.slot_outputs = experts_on_slots(slots).view({n, groups, p, c.output_dim});
  return r;
}

MoELayerImpl::EqualGroupsPass MoELayerImpl::equal_groups_pass(const torch::Tensor& tokens, int64_t groups,
                                                              const torch::Tensor& keep) {
  const auto& c = config_;
  const int64_t n = c.experts, m = tokens.size(0) / groups;
  const auto routing = equal_groups_routing(tokens, groups);
  const auto& a = routing.affinity;
  const auto& d = routing.dispatch;
  const auto combine = d * (a * keep.view({1, n})).view({groups, m, n, 1});  // [G, m, n, p]
  const auto& slot_outputs = routing.slot_outputs;
  EqualGroupsPass pass;
  pass.output = torch::einsum("gmnp,ngpo->gmo", {combine, slot_outputs}).reshape({groups * m, c.output_dim});
  pass.coefficients = combine.sum(-1).reshape({groups * m, n});
  pass.dropped_tokens = (d.detach().abs().sum({2, 3}) == 0).sum().item<int64_t>();
  pass.aux_loss_sum = torch::zeros({}, a.options());
  if (c.router == RouterKind::SoftmaxTokenChoice) {
    // importance_loss of each group, summed: Var(importance) / mean², importance = Σ_t a_t.
    const auto importance = a.view({groups, m, n}).sum(1);
    const auto mean = importance.mean(1);
    pass.aux_loss_sum = (importance.var(1, /*unbiased=*/false) / (mean * mean + 1e-12)).sum();
  }
  return pass;
}

MoEOutput MoELayerImpl::forward(const torch::Tensor& x, const std::vector<int64_t>& ablated) {
  const auto& c = config_;
  if ((x.dim() != 2 && x.dim() != 3) || x.size(-1) != c.input_dim)
    throw UsageError("an MoE layer with input size " + std::to_string(c.input_dim) + " takes [B, " +
                     std::to_string(c.input_dim) + "] or [B, T, " + std::to_string(c.input_dim) + "]");
  auto keep = torch::ones({c.experts}, x.options());
  for (const auto e : ablated) {
    if (e < 0 || e >= c.experts)
      throw UsageError("expert " + std::to_string(e) + " does not exist (the layer has " + std::to_string(c.experts) + ")");
    keep[e] = 0;
  }
  MoEOutput out;
  out.aux_loss = torch::zeros({}, x.options());
  if (c.router == RouterKind::SoftMoE) {
    // Per input: its T tokens are mixed into the n · p slots (a head's row is one token).
    const auto tokens = x.dim() == 3 ? x : x.unsqueeze(1);  // [B, T, I]
    const int64_t b = tokens.size(0), t = tokens.size(1);
    const auto pass = soft_moe_pass(tokens);
    const auto combine = pass.combine * keep.view({1, 1, c.experts, 1});
    const auto y = torch::einsum("btnp,nbpo->bto", {combine, pass.slot_outputs});
    const auto coefficients = combine.sum(-1);
    out.output = x.dim() == 3 ? y : y.squeeze(1);
    out.coefficients = x.dim() == 3 ? coefficients : coefficients.squeeze(1);
    out.tokens = b * t;
    return out;
  }
  const auto rows = x.reshape({-1, c.input_dim});
  const int64_t total = rows.size(0);
  if (total == 0) {
    auto shape = x.sizes().vec();
    shape.back() = c.output_dim;
    out.output = torch::zeros(shape, x.options());
    shape.back() = c.experts;
    out.coefficients = torch::zeros(shape, x.options());
    return out;
  }
  const int64_t group = routing_group(x, total);
  std::vector<torch::Tensor> outputs, coefficients;
  int64_t groups = 0, start = 0;
  // Many equal groups (a ViT's images, a head's batches) in one pass: one router matmul, one
  // expert evaluation for all their slots; only the allocation loops run group by group.
  if (const int64_t equal = total / group; equal >= 2) {
    auto pass = equal_groups_pass(rows.slice(0, 0, equal * group), equal, keep);
    outputs.push_back(pass.output);
    coefficients.push_back(pass.coefficients);
    out.dropped_tokens += pass.dropped_tokens;
    out.aux_loss = out.aux_loss + pass.aux_loss_sum;
    groups += equal;
    start = equal * group;
  }
  for (; start < total; start += group) {
    const auto tokens = rows.slice(0, start, std::min(total, start + group));
    torch::Tensor affinity;
    const auto routing = route(tokens, &affinity);
    const auto combine = routing.combine * keep.view({1, -1, 1});
    outputs.push_back(combine_slots(combine, experts_on_slots(slot_inputs(routing.dispatch, tokens))));
    coefficients.push_back(combine.sum(-1));
    out.dropped_tokens += dropped_tokens(routing.dispatch);
    if (c.router == RouterKind::SoftmaxTokenChoice) out.aux_loss = out.aux_loss + importance_loss(affinity);
    ++groups;
  }
  if (groups > 1) out.aux_loss = out.aux_loss / static_cast<double>(groups);
  auto shape = x.sizes().vec();
  shape.back() = c.output_dim;
  out.output = torch::cat(outputs).view(shape);
  shape.back() = c.experts;
  out.coefficients = torch::cat(coefficients).view(shape);
  out.tokens = total;
  return out;
}

torch::Tensor MoELayerImpl::outputs_without_each_expert(const torch::Tensor& x) {
  const auto& c = config_;
  if ((x.dim() != 2 && x.dim() != 3) || x.size(-1) != c.input_dim)
    throw UsageError("an MoE layer with input size " + std::to_string(c.input_dim) + " takes [B, I] or [B, T, I]");
  // y − contribution_i for every i: contributions [m, n, O] from the combine weights and the
  // slot outputs of each group (or input, for Soft MoE).
  std::vector<torch::Tensor> parts;
  if (c.router == RouterKind::SoftMoE) {
    const auto tokens = x.dim() == 3 ? x : x.unsqueeze(1);
    const auto pass = soft_moe_pass(tokens);
    const auto contributions = torch::einsum("btnp,nbpo->btno", {pass.combine, pass.slot_outputs});  // [B, T, n, O]
    const auto y = contributions.sum(2, /*keepdim=*/true);
    return (y - contributions).reshape({tokens.size(0) * tokens.size(1), c.experts, c.output_dim});
  }
  const auto rows = x.reshape({-1, c.input_dim});
  const int64_t total = rows.size(0);
  const int64_t group = routing_group(x, total);
  for (int64_t start = 0; start < total; start += group) {
    const auto tokens = rows.slice(0, start, std::min(total, start + group));
    const auto routing = route(tokens);
    const auto outputs = experts_on_slots(slot_inputs(routing.dispatch, tokens));   // [n, p, O]
    const auto contributions = torch::einsum("tnp,npo->tno", {routing.combine, outputs});  // [m, n, O]
    parts.push_back(contributions.sum(1, /*keepdim=*/true) - contributions);
  }
  if (parts.empty()) return torch::zeros({0, c.experts, c.output_dim}, x.options());
  return torch::cat(parts);
}

torch::Tensor MoELayerImpl::contributions_at_token(const torch::Tensor& x, int64_t token) {
  const auto& c = config_;
  if (x.dim() != 3 || x.size(-1) != c.input_dim)
    throw UsageError("contributions_at_token takes inputs [B, T, " + std::to_string(c.input_dim) + "], got " +
                     c10::str(x.sizes()));
  const int64_t b = x.size(0), t = x.size(1);
  if (token < 0 || token >= t)
    throw UsageError("token " + std::to_string(token) + " is outside the " + std::to_string(t) + " tokens of each input");
  if (b == 0) return torch::zeros({0, c.experts, c.output_dim}, x.options());
  if (c.router == RouterKind::SoftMoE) {
    const auto pass = soft_moe_pass(x);
    return torch::einsum("bnp,nbpo->bno", {pass.combine.select(1, token), pass.slot_outputs});
  }
  // Token and expert choice: each input must be one routing group, or a token's routing would
  // depend on the other inputs of the batch.
  if (const int64_t group = routing_group(x, b * t); group != t)
    throw UsageError("contributions_at_token needs each input to be one routing group: this layer routes groups of " +
                     std::to_string(group) + " tokens, the inputs hold " + std::to_string(t));
  const auto routing = equal_groups_routing(x.reshape({b * t, c.input_dim}), b);
  const auto a = routing.affinity.view({b, t, c.experts}).select(1, token);     // [B, n]
  const auto combine = routing.dispatch.select(1, token) * a.unsqueeze(-1);  // [B, n, p]
  return torch::einsum("bnp,nbpo->bno", {combine, routing.slot_outputs});
}

MoELayer copy_moe_layer(const MoELayer& layer, torch::Dtype dtype, const torch::Device& device) {
  return copy_for_eval(layer, dtype, device);
}

}  // namespace mumoe::nn
