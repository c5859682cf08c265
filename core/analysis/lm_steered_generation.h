// The torch side of steering (definitions in lm_steering.h): a forward pass of the μMoE GPT
// with α·c added at MLP block L, and seeded generation through it. The model is not modified
// (no hook is installed in MuMoEGptImpl; the forward is rebuilt here from its public blocks).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "text/tokenizer.h"
#include "analysis/lm_steering.h"
#include "nn/mumoe_gpt.h"

namespace mumoe::analysis {

/// What to add where: α · centre at block `layer`, on `site`. alpha = 0 or an empty centre is
/// "no steering".
struct SteeringHook {
  int64_t layer = 0;
  torch::Tensor centre;  ///< [C] (any dtype/device: converted to the model's)
  double alpha = 0;
  SteeringSite site = SteeringSite::MlpInput;
};

/// Logits [B, T, V] of `gpt` (eval-mode arithmetic: dropout is the identity) with the hook
/// applied at every position. Same operations as MuMoEGptImpl::forward otherwise, so with
/// alpha = 0 the logits equal gpt->forward(idx).logits exactly.
torch::Tensor steered_logits(nn::MuMoEGpt& gpt, const torch::Tensor& idx, const SteeringHook& hook);

/// MuMoEGptImpl::generate with the hook in every forward pass (same validation, cropping,
/// temperature / top-k and SplitMix64 draws), so the same seed gives the same uniform stream.
std::vector<int32_t> generate_steered(nn::MuMoEGpt& gpt, const std::vector<int32_t>& prompt, int64_t max_new_tokens,
                                      const SteeringHook& hook, double temperature = 1.0, int64_t top_k = 0,
                                      uint64_t seed = 0, const nn::TokenProgress& progress = {});

/// The steering vector as a float64 tensor [C].
torch::Tensor centre_tensor(const SteeringVector& vector);

/// Both generations for one request: unsteered = gpt->generate (exactly `mumoe generate`),
/// steered = generate_steered with α·centre. Encodes the prompt and decodes both with
/// `tokenizer` (the model's); fills everything but layer_name.
/// `progress` counts the tokens of both generations (2 × request.tokens); false cancels
/// (throws Cancelled).
SteeringResult steer_generation(nn::MuMoEGpt& gpt, const SteeringVector& vector, const SteeringRequest& request,
                                const text::Tokenizer& tokenizer, const nn::TokenProgress& progress = {});

}  // namespace mumoe::analysis
