// Copying a module's state into another instance of the same architecture — what analysis does to
// evaluate a model in float64 on its own copy, leaving the user's model untouched.
#pragma once

#include <torch/nn/module.h>

namespace mumoe::nn {

/// Copies every parameter and buffer of `from` into the same-named tensor of `to` (built with the
/// same configuration; it may have another dtype and device) without recording gradients, and
/// puts `to` in eval mode.
void copy_state_for_eval(const torch::nn::Module& from, torch::nn::Module& to);

}  // namespace mumoe::nn
