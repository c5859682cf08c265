// Gate activations for μMoE expert coefficients: exact entmax15 and softmax.
//
// entmax15 (α = 1.5) maps scores to a sparse probability vector. It is computed exactly by
// sorting (spec §1): O(d log d) per row, no iterations, no tolerance. The backward pass is
// the closed form g = sqrt(p); dx = dy·g − g·(Σ dy·g)/(Σ g), so gradients do not go through
// the sort.
#pragma once

#include <torch/types.h>

#include "nn/layer_config.h"

namespace mumoe::nn {

/// entmax15 over the last dimension. Works for any shape, dtype float/double, any device.
/// Entries must be finite (NaN/inf scores give NaN coefficients; callers validate inputs).
torch::Tensor entmax15(const torch::Tensor& scores);

/// entmax15's forward pass in ATen tensor operations on any device (no autograd): what entmax15
/// computes off the CPU, and the reference whose bits its CPU kernel reproduces (tests).
torch::Tensor entmax15_reference_forward(const torch::Tensor& scores);

/// Applies the chosen activation over the last dimension.
torch::Tensor apply_gate_activation(GateActivationKind activation, const torch::Tensor& scores);

}  // namespace mumoe::nn
