// Counterfactual ablation of experts in MLP block L of a μMoE GPT (spec §4, paper §4.1.2):
// next-token accuracy (per target-byte class) and loss over an evaluation token set, before and
// after W_n := 0 for a set of experts, or for each expert in turn (a sweep).
//
// Two methods with the same predictions, token for token:
//   * Sparse: the constructor runs the model once (float64) and keeps, per token, block L's
//     input h_L, its output x_{L+1}, its coefficients, the predictions and the losses. Removing
//     expert n leaves the gates alone (no renormalisation), so block L's output changes only at
//     tokens with a_n > 0: only those tokens' MLP outputs are re-evaluated, from h_L with
//     a_n := 0. Attention in the blocks after L mixes positions, so a changed token can change
//     any later token of its sequence: every sequence holding an affected token is re-run from
//     block L+1 to the logits, and no other sequence is touched. When L is the last block only
//     ln_f and lm_head follow, which act per token: then only the affected tokens are re-run.
//   * Naive (the oracle): zero expert n's factor slice of block L (CP: row n of factors.0; TR:
//     slice [:, n, :]; both layers of the two-layer block) and run every sequence through the
//     whole model, in the same batches as the baseline.
// A GPT with router MLPs (nn/mumoe_gpt.h): removing expert n sets its combine weights to 0, so
// again only tokens with a_n > 0 change; the sparse method re-runs the affected sequences' MLP
// (the router shares its buffers over a sequence), the naive one zeroes expert n's output layer
// (weights and bias) and runs the whole model.
// Everything runs in float64 on a copy of the model, so ties between the two methods' logits
// would need agreement to ~1e-13: the tests compare predictions exactly.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/lm_ablation_results.h"
#include "analysis/lm_eval_set.h"
#include "nn/mumoe_gpt.h"

namespace mumoe::analysis {

class LmAblation {
 public:
  /// Copies `gpt` (float64, `device`) and runs the baseline pass over `set` (which must outlive
  /// this object); `progress` (sequences done, total) may cancel with Cancelled.
  LmAblation(const nn::MuMoEGpt& gpt, const LmEvalSet& set, int64_t layer, const std::string& device = "cpu",
             const SweepCallback& progress = {});

  const LmBaseline& baseline() const { return baseline_; }
  int64_t layer() const { return layer_; }
  int64_t experts() const { return experts_; }
  /// Per token (set order): argmax next token and cross-entropy, unablated.
  const std::vector<int64_t>& predictions_before() const { return predictions_; }
  const std::vector<double>& losses_before() const { return losses_; }
  /// Block L's coefficients per token [tokens, N] (float64, CPU).
  torch::Tensor coefficients() const;

  struct After {
    std::vector<int64_t> predictions;  ///< per token
    std::vector<double> losses;        ///< per token
  };
  /// Every token's prediction and loss with `experts` of block L removed together.
  After after(const std::vector<int64_t>& experts, AblationMethod method);
  /// Sequences that hold a token with a_n > 0 for some n in `experts`, ascending.
  std::vector<int64_t> affected_sequences(const std::vector<int64_t>& experts) const;

  /// One entry: `experts` removed together.
  LmAblationReport ablate(const std::vector<int64_t>& experts, AblationMethod method);
  /// One entry per expert of `experts` (default: all), each removed alone. `progress` (experts
  /// done, total in the range) may cancel.
  LmAblationReport sweep(AblationMethod method, const SweepCallback& progress = {}, ExpertRange experts = {});

 private:
  void check(const std::vector<int64_t>& experts) const;
  torch::Tensor token_mask(const std::vector<int64_t>& experts) const;  ///< bool [S, T]: a_n > 0
  After after_sparse(const std::vector<int64_t>& experts);
  After after_naive(const std::vector<int64_t>& experts);
  LmAblationOutcome outcome(const std::vector<int64_t>& experts, const After& after) const;
  torch::Tensor sequence_ids(int64_t begin, int64_t end) const;  ///< long [end-begin, T]
  torch::Tensor sequence_targets(int64_t begin, int64_t end) const;

  nn::MuMoEGpt gpt_{nullptr};
  const LmEvalSet& set_;
  int64_t layer_;
  int64_t experts_ = 0;
  int64_t sequences_per_batch_ = 16;  ///< sequences_per_batch(): the same batches for every pass
  torch::Device device_;
  torch::Tensor mlp_input_;     ///< h_L [S, T, C] on device_
  torch::Tensor block_output_;  ///< x_{L+1} [S, T, C] on device_
  torch::Tensor coefficients_;  ///< [S, T, N] on device_
  std::vector<int64_t> predictions_;
  std::vector<double> losses_;
  std::vector<int64_t> class_of_token_;  ///< target byte → class index, -1 if it never is a target
  std::vector<int64_t> labels_;          ///< class index of each token's target
  LmBaseline baseline_;
};

}  // namespace mumoe::analysis
