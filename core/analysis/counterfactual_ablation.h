// Counterfactual expert ablation (spec §4, paper §4.1.2): what happens to per-class accuracy when
// W_n := 0 for one expert, a set of experts, or each expert of a mode in turn.
//
// Two methods with identical results:
//   * Sparse: removing expert n can change only the samples with a_n > 0, and (no
//     renormalisation) it leaves the gates untouched. For a single CP or TR layer the output is
//     linear in a mode's coefficients, so the change is a low-rank correction of the stored
//     output (rank_one_ablation.h): a bound on it skips every pair whose prediction cannot
//     change, the rest cost R·O each, and near-ties (top-two gap ≤ 1e-9 of the scores) are
//     re-evaluated as below. For a two-layer block (nonlinear) the affected samples' outputs are
//     re-evaluated from the stored inputs and coefficients with a_n := 0, many experts' samples
//     batched together. Cost ∝ Σ_n support(n) instead of N · S.
//   * Naive (the oracle): for each expert, zero the expert's factor slice — literally W_n := 0
//     (CP: row n of the mode's factor; TR: slice [:, n, :] of its core; both layers of a block)
//     — and run the whole layer, gates included, over every sample.
// A multi-label run (RunData::multilabel: labels and predictions are output bitmasks) is decided
// per output by the logit's sign, its accuracy is per output (output_accuracy), and the sparse
// method re-evaluates the affected rows (the rank-one bounds decide an argmax, not signs).
// Both evaluate the layer from the same stored float32 inputs as exact_layer.h does (the model's
// own gates, the expert arithmetic in float64), so they agree prediction for prediction (the tests
// check this against each other).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "analysis/ablation_results.h"
#include "analysis/exact_layer.h"
#include "analysis/rank_one_ablation.h"
#include "analysis/run_data.h"
#include "nn/mumoe_block.h"

namespace mumoe::analysis {

class CounterfactualAblation {
 public:
  /// `layer` is copied (ExactLayer, on `device`); `run` must outlive this object.
  CounterfactualAblation(const nn::MuMoEBlock& layer, const RunData& run, int64_t class_count,
                         const std::string& device = "cpu");

  const ClassAccuracy& before() const { return before_; }

  /// Every sample's prediction with the given experts of `mode` removed.
  std::vector<int64_t> predictions_after(int64_t mode, const std::vector<int64_t>& experts, AblationMethod method);
  AblationOutcome ablate(int64_t mode, const std::vector<int64_t>& experts, AblationMethod method);
  SweepOutcome sweep(int64_t mode, AblationMethod method, const SweepCallback& progress = {});

 private:
  void check_mode(int64_t mode) const;
  void check(int64_t mode, const std::vector<int64_t>& experts) const;
  /// Samples with a_n > 0 for some n in `experts` (of `mode`), ascending.
  std::vector<int64_t> affected_samples(int64_t mode, const std::vector<int64_t>& experts) const;
  AblationOutcome outcome(int64_t mode, const std::vector<int64_t>& experts, const std::vector<int64_t>& predictions,
                          int64_t affected) const;
  /// Predictions of the layer on `samples` (long [B]) with coefficient (row b, expert
  /// zeroed[b]) of `mode` set to 0 — several experts per row when rows repeat.
  torch::Tensor predict_rows(const torch::Tensor& samples, int64_t mode, const torch::Tensor& zero_row,
                             const torch::Tensor& zero_expert);
  /// One full pass of the layer over all samples, gates included (the naive oracle).
  std::vector<int64_t> predict_all();
  /// Zeroes (or restores) expert n's slice of mode `mode` in every layer of the block.
  void zero_expert_slices(int64_t mode, const std::vector<int64_t>& experts, std::vector<torch::Tensor>* saved);
  void restore_expert_slices(int64_t mode, const std::vector<int64_t>& experts, const std::vector<torch::Tensor>& saved);
  SweepOutcome sweep_sparse(int64_t mode, const SweepCallback& progress);
  /// The rank-one engine of `mode` (built on first use), or null for a two-layer block.
  RankOneAblation* rank_one(int64_t mode);
  /// Dense float64 coefficients of `samples` for every mode (undefined for `skip_mode`).
  std::vector<torch::Tensor> dense_coefficients(const torch::Tensor& samples, int64_t skip_mode = -1) const;
  /// Predictions of `samples` (ascending: affected_samples) after removing `experts` (ascending)
  /// of `mode` (rank-one path; near-ties re-evaluated with the experts zeroed).
  std::vector<int64_t> predictions_rank_one(int64_t mode, const std::vector<int64_t>& samples,
                                            const std::vector<int64_t>& experts);
  /// Per-expert class-wise changes of correct predictions and changed counts (rank-one path).
  void sweep_rank_one(int64_t mode, const SweepCallback& progress, std::vector<std::vector<int64_t>>* correct_delta,
                      std::vector<int64_t>* changed);
  /// Class scores as extraction stored them, float64 [S, O], with each row's top-two margin and
  /// the tolerance under which two scores count as tied (wider in rows of float32 scores:
  /// ExactLayer::certified_scores).
  const torch::Tensor& stored_scores();

  const RunData& run_;
  torch::Device device_;
  /// The naive oracle's full passes (gates included) and its float64 copy (slices zeroed by the
  /// oracle); the rank-one engines read its gate-dtype copy.
  ExactLayer exact_;
  int64_t class_count_;
  torch::Tensor inputs_;  ///< float32 [S, I]: a view of run_.inputs (no copy); rows become float64 where used
  torch::Tensor scores_, margins_, tie_tolerance_;  ///< stored_scores(): [S, O], [S], [S]
  std::map<int64_t, std::unique_ptr<RankOneAblation>> rank_one_;
  ClassAccuracy before_;
};

/// The outcome of removing `experts` of `mode` given every sample's prediction afterwards:
/// per-class accuracy, drop d, polysemanticity p (Eq. 4), changed predictions (against the run's).
AblationOutcome ablation_outcome(const RunData& run, const ClassAccuracy& before, int64_t class_count, int64_t mode,
                                 const std::vector<int64_t>& experts, const std::vector<int64_t>& predictions,
                                 int64_t affected);
}  // namespace mumoe::analysis
