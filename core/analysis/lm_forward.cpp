#include "analysis/lm_forward.h"

#include <torch/torch.h>

#include <algorithm>
#include <vector>

#include "io/errors.h"
#include "nn/module_state.h"

namespace mumoe::analysis {

nn::MuMoEGpt copy_gpt(const nn::MuMoEGpt& gpt, torch::Dtype dtype, const torch::Device& device) {
  return nn::copy_for_eval(gpt, dtype, device);
}

nn::MuMoEGpt gpt_for_eval(const nn::MuMoEGpt& gpt, torch::Dtype dtype, const torch::Device& device) {
  const auto& weight = gpt->wte()->weight;
  const auto on = weight.device();
  // "cuda" asks for the current device, which is where an index-less request puts the copy too.
  const bool same_device = on.type() == device.type() && (!device.has_index() || on.index() == device.index());
  if (!gpt->is_training() && weight.scalar_type() == dtype && same_device) return gpt;
  return copy_gpt(gpt, dtype, device);
}

namespace {

// MuMoEGptImpl::embed is private; this is its eval-mode arithmetic (dropout is the identity).
torch::Tensor embed(nn::MuMoEGpt& gpt, const torch::Tensor& idx) {
  const auto ids = idx.to(gpt->wte()->weight.device(), torch::kLong);
  const auto positions = torch::arange(idx.size(1), torch::dtype(torch::kLong).device(ids.device()));
  return gpt->wte()->forward(ids) + gpt->wpe()->forward(positions);
}

// Blocks from..n_layer-1 applied to the residual stream x [B, T, C].
torch::Tensor run_blocks(nn::MuMoEGpt& gpt, torch::Tensor x, int64_t from) {
  for (int64_t l = from; l < gpt->n_layer(); ++l) {
    auto b = gpt->block(l);
    x = b->mlp_residual(b->attention_residual(x)).output;
  }
  return x;
}

// ln_f and the tied lm_head: per token, so x may be [B, T, C] or [M, C].
torch::Tensor lm_head(nn::MuMoEGpt& gpt, const torch::Tensor& x) {
  return torch::nn::functional::linear(gpt->ln_f()->forward(x), gpt->wte()->weight);
}

}  // namespace

LayerPass forward_at_layer(nn::MuMoEGpt& gpt, const torch::Tensor& idx, int64_t layer, bool with_logits) {
  if (idx.dim() != 2 || idx.size(1) < 1 || idx.size(1) > gpt->config().block_size)
    throw UsageError("forward_at_layer expects token ids [B, T] with T ≤ block_size");
  torch::NoGradGuard no_grad;
  auto x = embed(gpt, idx);
  for (int64_t l = 0; l < layer; ++l) {
    auto b = gpt->block(l);
    x = b->mlp_residual(b->attention_residual(x)).output;
  }
  auto b = gpt->block(layer);
  LayerPass p;
  p.mlp_input = b->attention_residual(x);
  auto out = b->mlp_residual(p.mlp_input);
  p.block_output = out.output;
  p.coefficients = out.coefficients.front();
  p.final_stream = run_blocks(gpt, p.block_output, layer + 1);
  if (with_logits) p.logits = lm_head(gpt, p.final_stream);
  return p;
}

torch::Tensor forward_from_block(nn::MuMoEGpt& gpt, torch::Tensor x, int64_t from) {
  torch::NoGradGuard no_grad;
  return lm_head(gpt, run_blocks(gpt, std::move(x), from));
}

TokenOutcomes next_token_outcomes(nn::MuMoEGpt& gpt, const torch::Tensor& stream, const torch::Tensor& targets,
                                  int64_t piece_bytes) {
  torch::NoGradGuard no_grad;
  const auto x = stream.reshape({-1, stream.size(-1)});
  const auto t = targets.reshape({-1}).to(x.device(), torch::kLong);
  if (t.numel() != x.size(0)) throw UsageError("next_token_outcomes: one target per token");
  const int64_t row_bytes = gpt->config().vocab_size * static_cast<int64_t>(x.element_size());
  const int64_t rows = std::max<int64_t>(1, piece_bytes / std::max<int64_t>(1, row_bytes));
  std::vector<torch::Tensor> losses, predictions;
  for (int64_t begin = 0; begin < x.size(0); begin += rows) {
    const int64_t end = std::min(x.size(0), begin + rows);
    const auto logits = lm_head(gpt, x.slice(0, begin, end));
    losses.push_back(token_losses(logits, t.slice(0, begin, end)));
    predictions.push_back(logits.argmax(-1));
  }
  return {torch::cat(losses), torch::cat(predictions)};
}

torch::Tensor token_losses(const torch::Tensor& logits, const torch::Tensor& targets) {
  const auto v = logits.size(-1);
  return torch::cross_entropy_loss(logits.reshape({-1, v}), targets.reshape({-1}).to(logits.device(), torch::kLong),
                                   {}, at::Reduction::None);
}

int64_t gpt_layer_index(const std::string& name, int64_t n_layer) {
  auto fail = [&]() -> int64_t {
    throw UsageError("unknown layer '" + name + "': the GPT's MLP layers are transformer.h.0.mlp.MuMoE_layer … " +
                     "transformer.h." + std::to_string(n_layer - 1) + ".mlp.MuMoE_layer (transformer.h.{i}.mlp " +
                     "with router MLPs), or give the number 0–" + std::to_string(n_layer - 1));
  };
  std::string digits = name;
  const std::string prefix = "transformer.h.";
  if (name.rfind(prefix, 0) == 0) {
    auto rest = name.substr(prefix.size());
    if (!rest.empty() && rest.back() == '.') rest.pop_back();
    auto ends_with = [&rest](const std::string& suffix) {
      return rest.size() > suffix.size() && rest.compare(rest.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    // A μMoE GPT's block or a router GPT's MLP: either name selects layer i's MLP.
    const std::string suffix = ends_with(".mlp.MuMoE_layer") ? ".mlp.MuMoE_layer" : ".mlp";
    if (!ends_with(suffix)) return fail();
    digits = rest.substr(0, rest.size() - suffix.size());
  }
  if (digits.empty() || digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string::npos) return fail();
  const int64_t index = std::stoll(digits);
  if (index >= n_layer) return fail();
  return index;
}

}  // namespace mumoe::analysis
