// Training and evaluation of the μMoE GPT as a next-token language model, with progress
// callbacks that can cancel, periodic checkpoints and exact resume.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nn/expert_ablation.h"
#include "nn/mumoe_gpt.h"

namespace mumoe::train {

struct LmTrainOptions {
  int64_t steps = 2000;      ///< optimizer steps in all (a resumed run continues up to this)
  int64_t batch_size = 32;   ///< windows per step
  int64_t block_size = 0;    ///< tokens per window (0: the model's context length)
  double learning_rate = 1e-3;
  double min_learning_rate = 1e-4;  ///< where the cosine decay ends, at the last step
  int64_t warmup_steps = 100;       ///< linear warmup from learning_rate / (warmup_steps + 1)
  /// AdamW's decoupled weight decay, applied (as in nanoGPT) to matrices only: embeddings,
  /// attention projections, μMoE factors and gating; not to biases or LayerNorms.
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.99;
  double grad_clip = 1.0;  ///< global gradient-norm clipping (0: none)
  /// Weight of the router MLPs' load-balancing loss (GptOutput::aux_loss: Softmax Token Choice's
  /// importance loss, study App. A) added to the cross-entropy; μMoE GPTs have none. The losses
  /// reported (LmTrainProgress, LmTrainResult) are the cross-entropy alone.
  double aux_loss_weight = 0.01;
  uint64_t seed = 0;
  std::string device = "cpu";
  /// Every checkpoint_every steps and after the last step the model and optimizer are saved here
  /// (model file + ".optim.pt"); "" disables checkpoints.
  std::string checkpoint_path;
  int64_t checkpoint_every = 500;
  /// Continue from checkpoint_path if it exists.
  bool resume = false;
};

struct LmTrainProgress {
  int64_t step = 0;   ///< steps completed (1-based after the first step)
  int64_t steps = 0;  ///< total
  double loss = 0;    ///< this step's training loss (nats/token)
  double smoothed_loss = 0;  ///< exponential moving average (0.9) of the losses of this call
  double learning_rate = 0;
  double tokens_per_second = 0;
  double elapsed_seconds = 0;
  double eta_seconds = 0;
};

/// Return false to stop: train_lm then throws mumoe::Cancelled (the last checkpoint stays valid).
using LmTrainCallback = std::function<bool(const LmTrainProgress&)>;
/// Called to write a checkpoint (model file) to `path` after `completed_steps` steps.
using LmCheckpointWriter = std::function<void(const std::string& path, int64_t completed_steps)>;
/// Loads the checkpoint at `path` into the model and returns its completed steps.
using LmCheckpointReader = std::function<int64_t(const std::string& path)>;

struct LmTrainResult {
  std::vector<double> losses;  ///< per step run in this call
  int64_t first_step = 0;      ///< > 0 when resumed
  double seconds = 0;
};

/// Trains `gpt` with next-token cross-entropy on `train_tokens` (one long token stream; documents
/// joined by the caller). Step s draws batch_size random windows of block_size + 1 tokens with a
/// SplitMix64 generator seeded by (seed, s), and reseeds torch's generator (dropout) with
/// (seed, s): a resumed run sees exactly the batches and dropout masks of an uninterrupted one.
/// AdamW (betas beta1, beta2), learning rate with linear warmup then cosine decay to
/// min_learning_rate, gradient clipping. Leaves the model in eval mode on options.device.
/// Throws UsageError for bad options, too few tokens or ids outside the vocabulary.
LmTrainResult train_lm(nn::MuMoEGpt& gpt, const std::vector<int32_t>& train_tokens, const LmTrainOptions& options,
                       const LmTrainCallback& progress = {}, const LmCheckpointWriter& write_checkpoint = {},
                       const LmCheckpointReader& read_checkpoint = {});

/// The learning rate of step `step` (0-based) of a run of options.steps steps.
double lm_learning_rate_at(const LmTrainOptions& options, int64_t step);

struct LmEvaluation {
  int64_t tokens = 0;     ///< predicted tokens (every token but the first)
  double mean_loss = 0;   ///< cross-entropy, nats/token
  double perplexity = 0;  ///< exp(mean_loss)
  double accuracy = 0;    ///< fraction of tokens that are the argmax prediction
};

/// Evaluates `gpt` (eval mode, no gradients) over consecutive non-overlapping windows of
/// block_size + 1 tokens sharing their boundary token (window w predicts tokens
/// w·block_size + 1 … (w+1)·block_size from the ones before them in the window), the last one
/// shorter: every token but the first is predicted exactly once, with at most block_size tokens
/// of context. block_size 0: the model's. ablation_per_layer as in MuMoEGpt::forward.
/// Throws UsageError for fewer than 2 tokens or ids outside the vocabulary.
LmEvaluation evaluate_lm(nn::MuMoEGpt& gpt, const std::vector<int32_t>& tokens, int64_t block_size = 0,
                         int64_t batch_size = 32, const std::string& device = "cpu",
                         const std::vector<nn::ExpertAblation>& ablation_per_layer = {});

}  // namespace mumoe::train
