// Everything the bias-correction workflow computes from a multi-label model and its training and
// test data (spec §5): the μMoE layer's inputs, coefficients and logits of every sample are
// computed once, after which an edit (ā from the training subpopulation, λ), its fairness metrics
// on the test split, and the baselines (blind threshold, oversampled retraining) cost only
// vector operations — fast enough for a λ slider.
#pragma once

#include <torch/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "editing/fairness_metrics.h"
#include "editing/logit_edit.h"
#include "editing/subpopulation.h"
#include "model/classifier_model.h"

namespace mumoe::editing {

/// What is being corrected: output `target` (a label of the multi-label model), measured over
/// the four subpopulations target × `sensitive`; ā comes from the training samples of
/// `subpopulation` (usually the under-served cell, e.g. long_sleeves=1&frame=1).
struct BiasTask {
  std::string target;
  std::string sensitive;
  Subpopulation subpopulation;
};

/// Completes a task from the command line's pieces: `sensitive` "" = the one attribute of the
/// predicate that is not the target. Throws UsageError when that is ambiguous or missing.
BiasTask make_bias_task(const std::string& target, const std::string& subpopulation, const std::string& sensitive);

/// Called with (samples done, samples total) while the layer's inputs are computed; return
/// false to cancel (BiasStudy::create then throws Cancelled).
using StudyProgress = std::function<bool(int64_t, int64_t)>;

/// One split's per-sample arrays (CPU).
struct SplitArrays {
  torch::Tensor inputs;        ///< float32 [S, I]: the μMoE layer's inputs
  torch::Tensor coefficients;  ///< float32 [S, N]: first expert mode
  torch::Tensor logits;        ///< float32 [S, O]: unedited outputs
  torch::Tensor targets;       ///< int64 [S, O]: the multi-label truths
  torch::Tensor attributes;    ///< int64 [S, K]
  std::vector<std::string> attribute_names;
  std::string identity;
};

struct OversampleOptions {
  int64_t epochs = 5;
  int64_t batch_size = 256;
  double learning_rate = 2e-3;
  uint64_t seed = 0;
  /// How often each sample of the subpopulation is repeated; 0 = enough copies to match the
  /// cell of the same target value with the other sensitive value (capped at 100).
  int64_t factor = 0;
};

class BiasStudy {
 public:
  /// Computes the layer's inputs, coefficients and logits for both splits. `model` must be
  /// multi-label; both data sets are prepared for it (their attributes become targets). An
  /// empty `train` is allowed for metrics only (edits and baselines then throw UsageError).
  static BiasStudy create(model::ClassifierModel model, data::Dataset train, data::Dataset test,
                          const std::string& device = "cpu", const StudyProgress& progress = {});

  const model::ClassifierModel& model() const { return model_; }
  const SplitArrays& train() const { return train_; }
  const SplitArrays& test() const { return test_; }
  const std::vector<std::string>& target_names() const { return model_.label_names(); }
  int64_t output_index(const std::string& target) const;  ///< throws UsageError

  /// The expert-conditional edit for `task`: ā = mean first-mode coefficients of the task's
  /// training subpopulation; λ = N (experts of the first mode) with its sign chosen to move the
  /// logit toward the label the subpopulation is under-predicted for, unless `lambda` is given
  /// (then used as is, sign included). blind: the baseline ā = 1, |λ| = 2.5 by default.
  LogitEdit make_edit(const BiasTask& task, std::optional<double> lambda = {}, bool blind = false) const;

  /// Test-split logits with `edits` applied live.
  torch::Tensor edited_test_logits(const std::vector<LogitEdit>& edits) const;
  /// Metrics of output task.target on the test split, from these logits ([S, O]).
  FairnessReport fairness(const BiasTask& task, const torch::Tensor& test_logits) const;
  FairnessReport fairness(const BiasTask& task, const std::vector<LogitEdit>& edits = {}) const;
  /// Accuracy of every output on the test split (their mean is the multi-label test accuracy).
  std::vector<double> per_target_accuracy(const torch::Tensor& test_logits) const;

  /// The oversampling baseline: a fresh copy of the μMoE layer trained (from the same
  /// initialisation recipe, seeded) on the training split's layer inputs, with the task's
  /// subpopulation repeated; returns its test-split logits. The model itself is unchanged.
  torch::Tensor oversampled_test_logits(const BiasTask& task, const OversampleOptions& options,
                                        int64_t* repeat_factor = nullptr) const;

 private:
  BiasStudy(model::ClassifierModel model) : model_(std::move(model)) {}
  std::vector<uint8_t> train_mask(const Subpopulation& subpopulation) const;

  model::ClassifierModel model_;
  SplitArrays train_;
  SplitArrays test_;
};

}  // namespace mumoe::editing
