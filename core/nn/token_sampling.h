// The autoregressive sampling loop of a language model, shared by MuMoEGpt::generate and the
// steered generation (analysis/lm_steered_generation.h): one implementation, so that a
// steering strength of 0 reproduces plain generation token for token.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace mumoe::nn {

/// Logits [1, T, V] for the context idx [1, T] (long, on the model's device).
using ContextLogits = std::function<torch::Tensor(const torch::Tensor& idx)>;
/// Called after each generated token with (tokens done, tokens in all); false cancels (the
/// generation then throws Cancelled).
using TokenProgress = std::function<bool(int64_t done, int64_t total)>;

struct SamplingSettings {
  int64_t vocab_size = 0;
  /// > 0: only ids below it are drawn — the tokenizer's vocabulary where the embedding is padded
  /// past it (nanoGPT pads GPT-2's 50,257 tokens to 50,304 rows, which were never trained).
  int64_t sampled_vocabulary = 0;
  int64_t block_size = 0;        ///< the context is cropped to the last block_size tokens
  torch::Device device = torch::kCPU;
  int64_t max_new_tokens = 0;    ///< ≥ 0
  double temperature = 1.0;      ///< 0: the most likely token; > 0: softmax(logits / temperature)
  int64_t top_k = 0;             ///< > 0: sample among the k most likely only
  uint64_t seed = 0;
  TokenProgress progress;        ///< optional
};

/// Samples settings.max_new_tokens continuation tokens of `prompt` (non-empty, every id in the
/// vocabulary) and returns them without the prompt. Deterministic for a seed on every platform:
/// an inverse-CDF draw with a 53-bit uniform from SplitMix64 on CPU-side float64 probabilities
/// (not torch::multinomial). The caller sets eval mode and disables gradients.
/// Throws UsageError for bad arguments or a non-finite next-token distribution.
std::vector<int32_t> sample_continuation(const ContextLogits& logits_of, const std::vector<int32_t>& prompt,
                                         const SamplingSettings& settings);

}  // namespace mumoe::nn
