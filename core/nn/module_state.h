// Copying a module's state into another instance of the same architecture — what analysis does to
// evaluate a model in float64 on its own copy, leaving the user's model untouched.
#pragma once

#include <torch/nn/module.h>

namespace mumoe::nn {

/// Copies every parameter and buffer of `from` into the same-named tensor of `to` (built with the
/// same configuration; it may have another dtype and device) without recording gradients, and
/// puts `to` in eval mode. Throws if `to` has a tensor `from` lacks, so none is left as built.
void copy_state_for_eval(const torch::nn::Module& from, torch::nn::Module& to);

/// The same for a `to` just built for the purpose (as copy_block does): each tensor of `to` is
/// replaced by `from`'s converted to `dtype` on `device` (integer buffers keep their dtype), so the
/// storage `to` was built with is never read or converted. Throws, naming the tensor, if `to` has
/// one that `from` lacks or of another shape.
void replace_state_for_eval(const torch::nn::Module& from, torch::nn::Module& to, torch::Dtype dtype,
                            const torch::Device& device);

/// While one lives on a thread, the μMoE and router layers built on that thread skip their random
/// initial draws (their parameters stay uninitialised): for copies whose every tensor is replaced
/// at once by replace_state_for_eval (copy_block, copy_moe_layer). Why: drawing a 1,024 × 512
/// factor writes megabytes of fresh memory, and on this project's VMs touching a fresh page costs
/// ~16 µs (32 MB: 130 ms, measured 2026-11-25): the float32 copy of a rank-512 head took 3.5–6 ms
/// with its draws, 0.4 ms without.
class SkipRandomInitialisation {
 public:
  SkipRandomInitialisation();
  ~SkipRandomInitialisation();
  SkipRandomInitialisation(const SkipRandomInitialisation&) = delete;
  SkipRandomInitialisation& operator=(const SkipRandomInitialisation&) = delete;
  /// Whether a scope is open on the calling thread.
  static bool active();

 private:
  bool previous_;
};

/// An eval-mode copy of `module` (a module holder built from its config(): MuMoEBlock, MoELayer,
/// MuMoEGpt) in `dtype` on `device`: built without its random draws, every tensor then replaced
/// by replace_state_for_eval.
template <typename Holder>
Holder copy_for_eval(const Holder& module, torch::Dtype dtype, const torch::Device& device) {
  const SkipRandomInitialisation no_draws;  // every tensor is replaced below
  Holder copy(module->config());
  replace_state_for_eval(*module, *copy, dtype, device);
  return copy;
}

}  // namespace mumoe::nn
