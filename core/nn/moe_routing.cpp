#include "nn/moe_routing.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "io/errors.h"

namespace mumoe::nn {

namespace {

/// The affinities as a contiguous CPU double matrix [m, n], checked.
torch::Tensor checked_affinity(const torch::Tensor& a, const char* what) {
  if (a.dim() != 2) throw UsageError(std::string(what) + " must be a matrix [tokens, experts]");
  auto cpu = a.detach().to(torch::kCPU, torch::kDouble).contiguous();
  if (!torch::isfinite(cpu).all().item<bool>()) throw UsageError(std::string(what) + " holds NaN or infinite values");
  return cpu;
}

/// Indices of `values` (strided view of `count` doubles) ordered by value, largest first; ties:
/// the lower index first. Only the first `keep` are ordered.
std::vector<int64_t> largest_first(const double* values, int64_t count, int64_t stride, int64_t keep) {
  std::vector<int64_t> order(static_cast<size_t>(count));
  std::iota(order.begin(), order.end(), 0);
  keep = std::min(keep, count);
  std::partial_sort(order.begin(), order.begin() + keep, order.end(), [&](int64_t a, int64_t b) {
    const double va = values[a * stride], vb = values[b * stride];
    return va > vb || (va == vb && a < b);
  });
  order.resize(static_cast<size_t>(keep));
  return order;
}

/// D from the 0/1 slot mask (no gradient), C = mask ⊙ combine affinity (gradient to the router).
RoutingTensors from_mask(const torch::Tensor& mask, const torch::Tensor& combine_affinity) {
  const auto options = combine_affinity.options();
  const auto dispatch = mask.to(options.device(), options.dtype());
  return {dispatch, dispatch * combine_affinity.unsqueeze(-1)};
}

void check_same_shape(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.sizes() != b.sizes())
    throw UsageError("the dispatch and combine affinities must have the same shape [tokens, experts]");
}

}  // namespace

RoutingTensors token_choice_allocation(const torch::Tensor& dispatch_affinity, const torch::Tensor& combine_affinity,
                                       int64_t capacity, int64_t k) {
  check_same_shape(dispatch_affinity, combine_affinity);
  const auto a = checked_affinity(dispatch_affinity, "the dispatch affinity");
  const int64_t m = a.size(0), n = a.size(1);
  if (capacity < 1) throw UsageError("the buffer capacity must be at least 1");
  if (k < 1 || k > n) throw UsageError("k (experts per token) must be in 1 … " + std::to_string(n));
  const double* values = a.data_ptr<double>();
  std::vector<std::vector<int64_t>> choices(static_cast<size_t>(m));
  for (int64_t t = 0; t < m; ++t) choices[static_cast<size_t>(t)] = largest_first(values + t * n, n, 1, k);
  auto mask = torch::zeros({m, n, capacity}, torch::kFloat);
  auto slots = mask.accessor<float, 3>();
  std::vector<int64_t> filled(static_cast<size_t>(n), 0);
  for (int64_t r = 0; r < k; ++r)
    for (int64_t t = 0; t < m; ++t) {
      const int64_t i = choices[static_cast<size_t>(t)][static_cast<size_t>(r)];
      auto& used = filled[static_cast<size_t>(i)];
      if (used < capacity) slots[t][i][used++] = 1.0f;  // else this choice of the token is dropped
    }
  return from_mask(mask, combine_affinity);
}

RoutingTensors expert_choice_allocation(const torch::Tensor& dispatch_affinity, const torch::Tensor& combine_affinity,
                                        int64_t capacity) {
  check_same_shape(dispatch_affinity, combine_affinity);
  const auto a = checked_affinity(dispatch_affinity, "the dispatch affinity");
  const int64_t m = a.size(0), n = a.size(1);
  if (capacity < 1 || capacity > m)
    throw UsageError("the buffer capacity must be in 1 … " + std::to_string(m) + " (the tokens of a group)");
  const double* values = a.data_ptr<double>();
  auto mask = torch::zeros({m, n, capacity}, torch::kFloat);
  auto slots = mask.accessor<float, 3>();
  for (int64_t i = 0; i < n; ++i) {
    const auto chosen = largest_first(values + i, m, n, capacity);
    for (int64_t j = 0; j < capacity; ++j) slots[chosen[static_cast<size_t>(j)]][i][j] = 1.0f;
  }
  return from_mask(mask, combine_affinity);
}

torch::Tensor sinkhorn_plan(const torch::Tensor& logits, int64_t iterations) {
  if (logits.dim() != 2) throw UsageError("Sinkhorn needs a matrix of logits [tokens, experts]");
  if (iterations < 1) throw UsageError("Sinkhorn needs at least one iteration");
  torch::NoGradGuard no_grad;  // the plan only dispatches; gradients go through the softmax combine
  const int64_t m = logits.size(0), n = logits.size(1);
  // In the log domain: exp() of large logits would overflow and small ones underflow to rows of 0.
  auto log_plan = logits.to(torch::kDouble);
  const double log_m = std::log(static_cast<double>(m)), log_n = std::log(static_cast<double>(n));
  for (int64_t it = 0; it < iterations; ++it) {
    log_plan = log_plan - (torch::logsumexp(log_plan, 1, /*keepdim=*/true) + log_m);  // rows sum to 1/m
    log_plan = log_plan - (torch::logsumexp(log_plan, 0, /*keepdim=*/true) + log_n);  // columns to 1/n
  }
  return (log_plan + log_m).exp().to(logits.scalar_type());
}

namespace {

// The k-sparse simplex projection of values[0 .. d) into out[0], out[stride], … (d entries),
// scaled by `scale`: sparsemax of the k largest entries, zeros elsewhere.
void project_k_sparse(const double* values, int64_t d, int64_t k, double scale, double* out, int64_t stride) {
  const auto support = largest_first(values, d, 1, k);  // ordered, largest first
  // sparsemax of the kept entries: τ from the largest ρ with z_ρ > (Σ_{r ≤ ρ} z_r − 1) / ρ.
  double sum = 0, tau = 0;
  for (size_t j = 0; j < support.size(); ++j) {
    const double z = values[support[j]];
    sum += z;
    const double candidate = (sum - 1.0) / static_cast<double>(j + 1);
    if (z > candidate) tau = candidate;
  }
  for (int64_t t = 0; t < d; ++t) out[t * stride] = 0.0;
  for (const auto t : support) out[t * stride] = scale * std::max(0.0, values[t] - tau);
}

}  // namespace

torch::Tensor sparse_simplex_projection(const torch::Tensor& v, int64_t k) {
  if (v.dim() != 1) throw UsageError("the sparse simplex projection takes a vector");
  const auto x = v.detach().to(torch::kCPU, torch::kDouble).contiguous();
  if (k < 1) throw UsageError("the sparse simplex projection needs k ≥ 1");
  auto out = torch::empty({x.size(0)}, torch::kDouble);
  project_k_sparse(x.data_ptr<double>(), x.size(0), k, 1.0, out.data_ptr<double>(), 1);
  return out.to(v.options());
}

torch::Tensor sparsity_constrained_plan(const torch::Tensor& utility, int64_t capacity, double gamma,
                                        int64_t iterations, double step) {
  if (utility.dim() != 2) throw UsageError("the sparsity-constrained plan needs a utility matrix [tokens, experts]");
  if (gamma <= 0) throw UsageError("the sparsity-constrained plan needs γ > 0");
  torch::NoGradGuard no_grad;
  const auto u = checked_affinity(utility, "the utility");
  const int64_t m = u.size(0), n = u.size(1);
  if (capacity < 1 || capacity > m)
    throw UsageError("the buffer capacity must be in 1 … " + std::to_string(m) + " (the tokens of a group)");
  // Plain loops over [m, n] doubles: as tensor operations (a column's shift, projection and copy,
  // per expert per iteration, for every 17-token image) part of one epoch of the small ViT took
  // over 5 minutes; with the loops a whole epoch takes 33–75 s (2 cores, 2026-11-25).
  const double b = 1.0 / static_cast<double>(n);
  const double* utilities = u.data_ptr<double>();
  std::vector<double> alpha(static_cast<size_t>(m), 0.0), column(static_cast<size_t>(m));
  auto plan = torch::zeros({m, n}, torch::kDouble);
  double* p = plan.data_ptr<double>();
  for (int64_t it = 0;; ++it) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t t = 0; t < m; ++t) column[t] = (utilities[t * n + i] - alpha[t]) / (gamma * b);
      project_k_sparse(column.data(), m, capacity, b, p + i, n);  // column i of the plan
    }
    if (it == iterations) break;
    // Rows with more than their 1/m of mass get a higher potential (less utility), and back; the
    // step shrinks as 1/√(t + 1): with a constant one, experts that share their favourite tokens
    // chase them back and forth and the last plan leaves most tokens out.
    const double rate = step / std::sqrt(1.0 + static_cast<double>(it));
    for (int64_t t = 0; t < m; ++t) {
      double row = 0;
      for (int64_t i = 0; i < n; ++i) row += p[t * n + i];
      alpha[t] = alpha[t] + rate * gamma * b * (static_cast<double>(m) * row - 1.0);
    }
  }
  return (plan * static_cast<double>(m)).to(utility.options());
}

RoutingTensors soft_moe_routing(const torch::Tensor& slot_logits, int64_t experts) {
  if (slot_logits.dim() != 2 || experts < 1 || slot_logits.size(1) % experts != 0)
    throw UsageError("Soft MoE needs slot logits [tokens, experts × slots]");
  const int64_t m = slot_logits.size(0), p = slot_logits.size(1) / experts;
  const auto dispatch = torch::softmax(slot_logits, 0).view({m, experts, p});  // over the tokens
  const auto combine = torch::softmax(slot_logits, 1).view({m, experts, p});   // over every slot
  return {dispatch, combine};
}

torch::Tensor slot_inputs(const torch::Tensor& dispatch, const torch::Tensor& tokens) {
  return torch::einsum("tnp,td->npd", {dispatch, tokens});
}

torch::Tensor combine_slots(const torch::Tensor& combine, const torch::Tensor& slot_outputs) {
  return torch::einsum("tnp,npo->to", {combine, slot_outputs});
}

int64_t dropped_tokens(const torch::Tensor& dispatch) {
  return (dispatch.detach().abs().sum({1, 2}) == 0).sum().item<int64_t>();
}

torch::Tensor importance_loss(const torch::Tensor& affinity) {
  const auto importance = affinity.sum(0);
  const auto mean = importance.mean();
  return importance.var(/*unbiased=*/false) / (mean * mean + 1e-12);
}

}  // namespace mumoe::nn
