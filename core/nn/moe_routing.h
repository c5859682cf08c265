// Sparse and soft MoE routing in the unified form of the router study
// (../shared/papers/routers-in-vision-moe.txt, §1.2–2.6): a group of m tokens X [m, d] is sent to
// n experts with p buffer slots each by a dispatch tensor D [m, n, p], and the experts' slot
// outputs are mixed back by a combine tensor C [m, n, p]:
//
//     slot (i, j) input   x̃_ij = Σ_t D[t, i, j] · x_t
//     slot (i, j) output  ỹ_ij = f_i(x̃_ij)
//     token t output      y_t  = Σ_{i, j} C[t, i, j] · ỹ_ij
//
// One implementation of that form (combine_slots below and MoELayer in moe_layer.h); the six
// routers of the study are small functions of the token–expert affinity matrix:
//
//   router                      dispatch allocated from         by           combine weights from
//   Softmax Token Choice        softmax(X W)                    Algorithm 1  softmax(X W)
//   Sinkhorn Token Choice       Sinkhorn plan of exp(X W)       Algorithm 1  softmax(X W)
//   Softmax Expert Choice       softmax(X W)                    Algorithm 2  softmax(X W)
//   Sinkhorn Expert Choice      Sinkhorn plan of exp(X W)       Algorithm 2  softmax(X W)
//   Sparsity-constrained EC     sparsity-constrained OT plan    Algorithm 2  softmax(X W)
//   Soft MoE                    softmax over tokens of X Φ      (dense)      softmax over slots
//
// (Sinkhorn and sparsity-constrained routers dispatch with their plan but combine with the
// softmax, as the study recommends in §2.2 and §3.4: gradients then never pass through the
// optimal-transport solver.)
//
// The allocations are sequential by definition and run on the CPU in plain loops with a fixed
// tie rule (the lower index wins), so that the same affinities always give the same routing.
#pragma once

#include <torch/types.h>

#include "nn/moe_layer_config.h"

#include <cstdint>
#include <string>

namespace mumoe::nn {

/// The routing tensors of one group: dispatch and combine, both [m, n, p] (float, on the CPU or
/// the device of the affinities they were made from).
struct RoutingTensors {
  torch::Tensor dispatch;
  torch::Tensor combine;
};

/// Algorithm 1 (Token Choice allocation). For r = 1 … k, then for each token t in order: the
/// expert i with the r-th largest `dispatch_affinity[t, i]` (ties: the lower expert index) takes
/// the token into its next free slot j if it has one — D[t, i, j] = 1, C[t, i, j] =
/// combine_affinity[t, i] — else the token's r-th choice is dropped. Affinities [m, n].
RoutingTensors token_choice_allocation(const torch::Tensor& dispatch_affinity, const torch::Tensor& combine_affinity,
                                       int64_t capacity, int64_t k);

/// Algorithm 2 (Expert Choice allocation). Each expert i, in order, takes the `capacity` tokens
/// with the largest `dispatch_affinity[t, i]` (ties: the lower token index) into its slots
/// j = 0 … p−1, largest first: D[t, i, j] = 1, C[t, i, j] = combine_affinity[t, i]. A token may be
/// taken by several experts or by none. Affinities [m, n], capacity ≤ m.
RoutingTensors expert_choice_allocation(const torch::Tensor& dispatch_affinity, const torch::Tensor& combine_affinity,
                                        int64_t capacity);

/// The entropy-regularised optimal-transport plan of the study's eq. 8 by Sinkhorn's algorithm:
/// K = exp(logits − max), then `iterations` rounds of normalising every row to sum 1/m and every
/// column to sum 1/n (uniform marginals: every expert gets the same mass). Returned scaled by m,
/// so rows sum to 1 like a softmax: [m, n].
torch::Tensor sinkhorn_plan(const torch::Tensor& logits, int64_t iterations = 20);

/// The Euclidean projection of v (1-D) onto the probability simplex restricted to at most k
/// nonzeros: the projection (sparsemax) of v's k largest entries (ties: lower index), zeros
/// elsewhere — the optimal k-sparse projection (Kyrillidis et al., 2013).
torch::Tensor sparse_simplex_projection(const torch::Tensor& v, int64_t k);

/// The sparsity-constrained optimal-transport plan of the study's eq. 9 (Liu et al., 2023),
/// approximately, by its semi-dual: maximise <P, U> − γ/2 ‖P‖² with rows summing to 1/m, columns
/// to 1/n and at most `capacity` nonzeros per column, for a positive utility U [m, n] (the
/// router uses the softmax affinity). Each column is b · sparse_simplex_projection((U[:, i] −
/// α) / (γ b), capacity) with b = 1/n; the row potentials α take `iterations` gradient steps of
/// size `step` toward the row marginals. Returned scaled by m (rows sum to about 1): [m, n]; every
/// column has at most `capacity` nonzeros whatever the number of iterations.
torch::Tensor sparsity_constrained_plan(const torch::Tensor& utility, int64_t capacity, double gamma = 1.0,
                                        int64_t iterations = 50, double step = 0.5);

/// Soft MoE's routing tensors (study §2.6) for one input's tokens: logits [m, n·p] = X Φ, read as
/// [m, n, p]; dispatch = softmax over the tokens (each slot is a convex combination of the
/// tokens), combine = softmax over all n·p slots (each output a convex combination of the slots).
RoutingTensors soft_moe_routing(const torch::Tensor& slot_logits, int64_t experts);

/// The unified layer's output from routing tensors and slot outputs: y_t = Σ C[t, i, j] ỹ_ij,
/// with slot_outputs [n, p, o]. And the slot inputs x̃ = Dᵀ X: [n, p, d].
torch::Tensor slot_inputs(const torch::Tensor& dispatch, const torch::Tensor& tokens);
torch::Tensor combine_slots(const torch::Tensor& combine, const torch::Tensor& slot_outputs);

/// Tokens no slot received (every D[t, :, :] zero): capacity-limited routers drop them.
int64_t dropped_tokens(const torch::Tensor& dispatch);

/// The importance loss of the study's Appendix A: the squared coefficient of variation of the
/// experts' summed routing probabilities over the group, CV(Σ_t A[t, :])². Differentiable.
torch::Tensor importance_loss(const torch::Tensor& affinity);

}  // namespace mumoe::nn
