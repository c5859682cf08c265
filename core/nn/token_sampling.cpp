#include "nn/token_sampling.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <string>

#include "io/errors.h"
#include "text/splitmix64.h"

namespace mumoe::nn {

std::vector<int32_t> sample_continuation(const ContextLogits& logits_of, const std::vector<int32_t>& prompt,
                                         const SamplingSettings& s) {
  if (prompt.empty()) throw UsageError("generation needs a prompt of at least one token");
  if (s.max_new_tokens < 0) throw UsageError("max_new_tokens must be ≥ 0");
  if (!(s.temperature >= 0) || !std::isfinite(s.temperature)) throw UsageError("temperature must be ≥ 0");
  if (s.top_k < 0) throw UsageError("top_k must be ≥ 0 (0: no top-k filter)");
  for (auto id : prompt)
    if (id < 0 || id >= s.vocab_size)
      throw UsageError("prompt token " + std::to_string(id) + " is outside the vocabulary (0–" +
                       std::to_string(s.vocab_size - 1) + ")");

  text::SplitMix64 rng(s.seed);
  std::vector<int64_t> context(prompt.begin(), prompt.end());
  std::vector<int32_t> generated;
  for (int64_t step = 0; step < s.max_new_tokens; ++step) {
    const auto begin =
        static_cast<int64_t>(context.size()) > s.block_size ? context.end() - s.block_size : context.begin();
    const std::vector<int64_t> window(begin, context.end());
    const auto idx = torch::tensor(window, torch::kLong).view({1, -1}).to(s.device);
    auto logits = logits_of(idx).select(0, 0).select(0, -1).to(torch::kCPU, torch::kFloat64);
    if (s.sampled_vocabulary > 0 && s.sampled_vocabulary < logits.size(0)) logits = logits.slice(0, 0, s.sampled_vocabulary);

    int64_t next = 0;
    if (s.temperature == 0) {
      next = logits.argmax().item<int64_t>();
    } else {
      logits = logits / s.temperature;
      if (s.top_k > 0 && s.top_k < s.vocab_size) {
        const auto kth = std::get<0>(logits.topk(s.top_k)).min();
        logits = logits.masked_fill(logits < kth, -std::numeric_limits<double>::infinity());
      }
      const auto probs = torch::softmax(logits, 0).contiguous();
      const auto p = probs.accessor<double, 1>();
      const double u = static_cast<double>(rng.next() >> 11) * 0x1.0p-53;
      double cumulative = 0;
      next = -1;
      for (int64_t v = 0; v < p.size(0); ++v) {
        if (p[v] <= 0) continue;
        next = v;  // the last token with p > 0 absorbs rounding at the top of the CDF
        cumulative += p[v];
        if (u < cumulative) break;
      }
      if (next < 0) throw UsageError("the model's next-token distribution is not finite");
    }
    context.push_back(next);
    generated.push_back(static_cast<int32_t>(next));
    if (s.progress && !s.progress(step + 1, s.max_new_tokens)) throw Cancelled();
  }
  return generated;
}

}  // namespace mumoe::nn
