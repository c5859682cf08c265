#include "train/lm_training.h"
#include "train/optimizer_file.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>

#include "io/errors.h"
#include "nn/device.h"
#include "text/splitmix64.h"

namespace mumoe::train {
namespace {

// The token stream as a long tensor, after checking every id against the vocabulary (an id
// outside it would otherwise fail deep inside the embedding, far from its cause).
torch::Tensor token_tensor(const std::vector<int32_t>& tokens, int64_t vocab_size, const std::string& what) {
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= vocab_size)
      throw UsageError(what + " token " + std::to_string(i) + " has id " + std::to_string(tokens[i]) +
                       ", outside the model's vocabulary (0–" + std::to_string(vocab_size - 1) + ")");
  return torch::from_blob(const_cast<int32_t*>(tokens.data()), {static_cast<int64_t>(tokens.size())},
                          torch::kInt32)
      .to(torch::kLong);
}

int64_t window_length(int64_t requested, const nn::GptConfig& config) {
  if (requested < 0) throw UsageError("block size must be ≥ 0 (0: the model's)");
  const int64_t length = requested == 0 ? config.block_size : requested;
  if (length > config.block_size)
    throw UsageError("block size " + std::to_string(length) + " exceeds the model's context of " +
                     std::to_string(config.block_size) + " tokens");
  return length;
}

// Rows stream[start + 0 … start + length] for every start: [starts, length + 1].
torch::Tensor windows(const torch::Tensor& stream, const torch::Tensor& starts, int64_t length) {
  return stream.index({starts.unsqueeze(1) + torch::arange(length + 1, torch::kLong).unsqueeze(0)});
}

uint64_t step_seed(uint64_t seed, int64_t step) { return seed * 1000003 + static_cast<uint64_t>(step); }

}  // namespace

double lm_learning_rate_at(const LmTrainOptions& o, int64_t step) {
  if (step < o.warmup_steps)
    return o.learning_rate * static_cast<double>(step + 1) / static_cast<double>(o.warmup_steps + 1);
  const double span = static_cast<double>(std::max<int64_t>(1, o.steps - 1 - o.warmup_steps));
  const double progress = std::min(1.0, static_cast<double>(step - o.warmup_steps) / span);
  return o.min_learning_rate + 0.5 * (1 + std::cos(M_PI * progress)) * (o.learning_rate - o.min_learning_rate);
}

LmTrainResult train_lm(nn::MuMoEGpt& gpt, const std::vector<int32_t>& train_tokens, const LmTrainOptions& o,
                       const LmTrainCallback& progress, const LmCheckpointWriter& write_checkpoint,
                       const LmCheckpointReader& read_checkpoint) {
  if (o.steps <= 0 || o.batch_size <= 0 || o.learning_rate <= 0)
    throw UsageError("steps, batch size and learning rate must be positive");
  if (o.min_learning_rate < 0 || o.min_learning_rate > o.learning_rate)
    throw UsageError("the minimum learning rate must be in [0, learning rate]");
  if (o.warmup_steps < 0 || o.weight_decay < 0 || o.grad_clip < 0)
    throw UsageError("warmup steps, weight decay and gradient clipping must be ≥ 0");
  if (!o.checkpoint_path.empty() && o.checkpoint_every <= 0)
    throw UsageError("checkpoint_every must be positive");
  const auto& config = gpt->config();
  const int64_t length = window_length(o.block_size, config);
  const auto stream = token_tensor(train_tokens, config.vocab_size, "training");
  const int64_t n = stream.numel();
  if (n < length + 1)
    throw UsageError("training needs at least block size + 1 = " + std::to_string(length + 1) + " tokens, got " +
                     std::to_string(n));
  const auto device = nn::parse_device(o.device);
  gpt->to(device);

  // nanoGPT's grouping: weight decay on every matrix, none on biases and LayerNorm parameters.
  // A router MLP's per-expert biases are matrices [n, H] by shape but biases by role.
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& p : gpt->named_parameters()) {
    const auto& key = p.key();
    const bool bias = key.size() >= 3 && (key.compare(key.size() - 3, 3, "_b1") == 0 || key.compare(key.size() - 3, 3, "_b2") == 0);
    (p.value().dim() >= 2 && !bias ? decay : no_decay).push_back(p.value());
  }
  const auto adamw = torch::optim::AdamWOptions(o.learning_rate).betas(std::make_tuple(o.beta1, o.beta2));
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(
                                 torch::optim::AdamWOptions(adamw).weight_decay(o.weight_decay)));
  groups.emplace_back(no_decay,
                      std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(adamw).weight_decay(0)));
  torch::optim::AdamW optimizer(std::move(groups), adamw);

  LmTrainResult result;
  const std::string optimizer_path = optimizer_state_path(o.checkpoint_path);
  if (!o.checkpoint_path.empty()) io::require_replaceable(optimizer_path);
  if (o.resume && !o.checkpoint_path.empty() && std::filesystem::exists(o.checkpoint_path)) {
    if (!read_checkpoint) throw UsageError("resuming needs a checkpoint reader");
    result.first_step = read_checkpoint(o.checkpoint_path);
    gpt->to(device);
    if (std::filesystem::exists(optimizer_path)) torch::load(optimizer, optimizer_path);
  }

  const auto start = std::chrono::steady_clock::now();
  double smoothed = 0;
  for (int64_t step = result.first_step; step < o.steps; ++step) {
    gpt->train();
    // Seeded per step: the windows and the dropout masks do not depend on whether the run was
    // resumed.
    torch::manual_seed(step_seed(o.seed, step));
    text::SplitMix64 rng(step_seed(o.seed, step));
    std::vector<int64_t> offsets(static_cast<size_t>(o.batch_size));
    for (auto& offset : offsets) offset = static_cast<int64_t>(rng.below(static_cast<uint64_t>(n - length)));
    const auto batch = windows(stream, torch::tensor(offsets, torch::kLong), length).to(device);
    const auto inputs = batch.slice(1, 0, length), targets = batch.slice(1, 1, length + 1);

    const double lr = lm_learning_rate_at(o, step);
    for (auto& group : optimizer.param_groups())
      static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
    optimizer.zero_grad();
    const auto out = gpt->forward(inputs);
    const auto cross_entropy = torch::cross_entropy_loss(out.logits.reshape({-1, config.vocab_size}), targets.reshape({-1}));
    auto loss = cross_entropy;
    if (o.aux_loss_weight != 0 && out.aux_loss.defined()) loss = loss + o.aux_loss_weight * out.aux_loss;
    loss.backward();
    if (o.grad_clip > 0) torch::nn::utils::clip_grad_norm_(gpt->parameters(), o.grad_clip);
    optimizer.step();

    const double value = cross_entropy.item<double>();
    result.losses.push_back(value);
    smoothed = result.losses.size() == 1 ? value : 0.9 * smoothed + 0.1 * value;
    const int64_t done = step + 1;
    if (!o.checkpoint_path.empty() && write_checkpoint && (done % o.checkpoint_every == 0 || done == o.steps)) {
      write_checkpoint(o.checkpoint_path, done);
      save_optimizer_state(optimizer, optimizer_path);
    }
    if (progress) {
      LmTrainProgress p;
      p.step = done;
      p.steps = o.steps;
      p.loss = value;
      p.smoothed_loss = smoothed;
      p.learning_rate = lr;
      p.elapsed_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const auto steps_here = static_cast<double>(result.losses.size());
      p.tokens_per_second = p.elapsed_seconds > 0 ? steps_here * o.batch_size * length / p.elapsed_seconds : 0;
      p.eta_seconds = p.elapsed_seconds / steps_here * static_cast<double>(o.steps - done);
      if (!progress(p)) throw Cancelled();
    }
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  gpt->eval();
  return result;
}

LmEvaluation evaluate_lm(nn::MuMoEGpt& gpt, const std::vector<int32_t>& tokens, int64_t block_size,
                         int64_t batch_size, const std::string& device_name,
                         const std::vector<nn::ExpertAblation>& ablation) {
  const auto& config = gpt->config();
  const int64_t length = window_length(block_size, config);
  if (batch_size <= 0) throw UsageError("batch size must be positive");
  const auto stream = token_tensor(tokens, config.vocab_size, "evaluation");
  const int64_t n = stream.numel();
  if (n < 2) throw UsageError("evaluation needs at least 2 tokens, got " + std::to_string(n));
  const auto device = nn::parse_device(device_name);
  gpt->to(device);
  gpt->eval();
  torch::NoGradGuard no_grad;

  double loss_sum = 0;
  int64_t correct = 0, predicted = 0;
  auto run = [&](const std::vector<int64_t>& starts, int64_t window) {
    const auto batch = windows(stream, torch::tensor(starts, torch::kLong), window).to(device);
    const auto targets = batch.slice(1, 1, window + 1).reshape({-1});
    const auto logits = gpt->forward(batch.slice(1, 0, window), ablation)
                            .logits.reshape({-1, config.vocab_size})
                            .to(torch::kFloat64);
    loss_sum += torch::cross_entropy_loss(logits, targets, {}, at::Reduction::Sum).item<double>();
    correct += (logits.argmax(1) == targets).sum().item<int64_t>();
    predicted += targets.numel();
  };
  // Full windows in batches, then the shorter last one (if any) on its own.
  const int64_t full = (n - 1) / length;
  std::vector<int64_t> starts;
  for (int64_t w = 0; w < full; ++w) {
    starts.push_back(w * length);
    if (static_cast<int64_t>(starts.size()) == batch_size || w + 1 == full) {
      run(starts, length);
      starts.clear();
    }
  }
  if (const int64_t rest = (n - 1) - full * length; rest > 0) run({full * length}, rest);

  LmEvaluation e;
  e.tokens = predicted;
  e.mean_loss = loss_sum / static_cast<double>(predicted);
  e.perplexity = std::exp(e.mean_loss);
  e.accuracy = static_cast<double>(correct) / static_cast<double>(predicted);
  return e;
}

}  // namespace mumoe::train
