// Independent reference implementations for the tests. Deliberately naive: scalar loops over
// double-precision data, no factorised contractions, no torch ops beyond element access, so
// that they share no code path with the core they check.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "nn/layer_config.h"
#include "nn/mumoe_block.h"

namespace mumoe::testkit {

/// entmax15 of one row by bisection on τ: p_i = max(x_i/2 − τ, 0)², Σ p = 1.
std::vector<double> entmax15_bisect(const std::vector<double>& x);

/// The full weight tensor W[n_1,…,n_E, i, o] from CP factors or TR cores, by brute force.
/// Returned flat in row-major order; `dims` receives {N_1,…,N_E, I(+1), O}.
std::vector<double> materialize_weight(const std::vector<torch::Tensor>& factors,
                                       nn::Factorization f, std::vector<int64_t>& dims);

/// y[m,o] = Σ_{n_1..n_E} Π_e a_e[m,n_e] Σ_i W[n,i,o] z'[m,i] with the materialised W.
torch::Tensor reference_layer(const std::vector<torch::Tensor>& factors, nn::Factorization f,
                              bool use_bias, const torch::Tensor& z,
                              const std::vector<torch::Tensor>& coefficients);

/// The whole block (gating with eval-mode BatchNorm / LayerNorm / none, entmax by bisection or
/// softmax, input LayerNorm, one or two layers with exact GELU) from the block's parameters.
/// x is [M, I] in double; returns output [M, O'] and fills `coefficients`.
torch::Tensor reference_block(const nn::MuMoEBlock& block, const torch::Tensor& x,
                              std::vector<torch::Tensor>& coefficients);

/// Fills every parameter and BatchNorm buffer of the block with random values (running_var
/// positive) so that the coefficients are not uniform and every factor matters.
void randomize(nn::MuMoEBlock& block, uint64_t seed);

/// Relative error ‖a − b‖ / ‖b‖ (double).
double relative_error(const torch::Tensor& a, const torch::Tensor& b);

}  // namespace mumoe::testkit
