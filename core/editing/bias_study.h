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
#include "editing/bias_task.h"
#include "editing/fairness_metrics.h"
#include "editing/logit_edit.h"
#include "editing/subpopulation.h"
#include "editing/variant_metrics.h"
#include "model/classifier_model.h"

namespace mumoe::editing {

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

/// Checks that `model` is multi-label and prepares both splits for it (attributes become
/// targets; an empty `train` stays empty). `model_name` starts the error messages (the file).
/// Throws UsageError.
void prepare_study_data(const model::ClassifierModel& model, const std::string& model_name, data::Dataset& train,
                        data::Dataset& test);

class BiasStudy {
 public:
  /// Computes the layer's inputs, coefficients and logits for both splits. `model` must be
  /// multi-label; both data sets are prepared for it (their attributes become targets). An
  /// empty `train` is allowed for metrics only (edits and baselines then throw UsageError).
  static BiasStudy create(model::ClassifierModel model, data::Dataset train, data::Dataset test,
                          const std::string& device = "cpu", const StudyProgress& progress = {});

  /// A study from arrays computed elsewhere (the analysis cache: cached_bias_study.h). Both
  /// splits must have the model's outputs, first-mode experts and targets; throws UsageError.
  static BiasStudy from_arrays(model::ClassifierModel model, SplitArrays train, SplitArrays test);

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
  /// The variant with these test logits, measured for `task` (MRS unset).
  VariantMetrics measure(const BiasTask& task, std::string name, const torch::Tensor& test_logits) const;

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

/// The comparison `mumoe rewrite` prints and the GUI's Bias page shows (variant_metrics.h):
/// before = the model with `prior` applied (edited_model_name), after = before + `edit` (named
/// "expert rewrite", or "blind threshold" for a blind edit), MRS of after against before.
/// Baselines are added by the two functions below.
RewriteComparison compare_rewrite(const BiasStudy& study, const BiasTask& task, const std::vector<LogitEdit>& prior,
                                  const LogitEdit& edit);
/// The blind-threshold baseline on top of `prior`, MRS against `before` ("blind threshold").
VariantMetrics blind_threshold_baseline(const BiasStudy& study, const BiasTask& task,
                                        const std::vector<LogitEdit>& prior, const VariantMetrics& before);
/// The oversampling baseline (a retrained layer: seconds), MRS against `before` ("oversample").
/// The retrained layer starts from the model as opened: earlier edits are not part of it.
VariantMetrics oversample_baseline(const BiasStudy& study, const BiasTask& task, const OversampleOptions& options,
                                   const VariantMetrics& before, int64_t* repeat_factor = nullptr);

}  // namespace mumoe::editing
