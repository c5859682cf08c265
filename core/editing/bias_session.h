// BiasSession: the bias-correction workflow (spec §5) behind a torch-free façade, for the GUI's
// bias panel (and anything else that must not include LibTorch). It owns a BiasStudy (the μMoE
// layer's coefficients and logits of every training and test sample, computed once on open),
// the model's edit stack — kept in the edit session database (edit_session_store.h), keyed by
// the model file's content hash, saved on every change and restored on open — and exports the
// applied edits folded into the weights (model_export.h), verified on the test split.
//
// After open, propose() and evaluate() are vector operations over the cached arrays (a few ms
// for the 10,000 test images of demo 2): what a λ slider calls. Not thread-safe: one thread at
// a time (the GUI keeps it on its worker thread).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "editing/bias_report_request.h"
#include "editing/bias_task.h"
#include "editing/edit_stack.h"
#include "editing/export_request.h"
#include "editing/fairness_metrics.h"
#include "editing/logit_edit.h"
#include "editing/variant_metrics.h"
#include "model/model_summary.h"
#include "report/html_report.h"

namespace mumoe::editing {

struct BiasSessionOptions {
  std::string model_path;
  std::string test_spec = "biased-fmnist:test";    ///< where metrics are measured (and exports verified)
  std::string train_spec = "biased-fmnist:train";  ///< where ā comes from
  std::string device = "cpu";                      ///< for the backbone while the study is computed
  /// The edit session database; "" = default_session_db(cache_path): "edits.sqlite" beside the
  /// analysis cache.
  std::string session_db;
  /// The analysis cache that keeps each split's layer inputs, coefficients and outputs, so that a
  /// reopened session is a cache read ("" = cache::default_cache_path()).
  std::string cache_path;
};

/// "edits.sqlite" in the directory of the analysis cache `cache_path` ("" = the directory of
/// cache::default_cache_path(), which honours $MUMOE_CACHE): where the GUI keeps edits.
std::string default_session_db(const std::string& cache_path);

/// (samples done, samples total) while the layer's inputs are computed; false cancels
/// (open() then throws Cancelled).
using BiasProgress = std::function<bool(int64_t, int64_t)>;

/// What the model file holds (model_summary.h); reads its header. Throws FileError.
using ModelKind = model::ModelKind;
ModelKind probe_model_kind(const std::string& model_path);

class BiasSession {
 public:
  /// Loads the model (must be multi-label) and both splits, computes the study (slow: one pass
  /// of the backbone over every sample, with progress) and restores the model's edit stack from
  /// the session database. Throws UsageError / FileError / Cancelled.
  static std::unique_ptr<BiasSession> open(const BiasSessionOptions& options, const BiasProgress& progress = {});
  ~BiasSession();
  BiasSession(const BiasSession&) = delete;
  BiasSession& operator=(const BiasSession&) = delete;

  const BiasSessionOptions& options() const;
  const std::string& model_hash() const;
  const std::string& session_db_path() const;
  const std::string& layer_name() const;
  std::vector<std::string> target_names() const;     ///< the model's outputs
  std::vector<std::string> attribute_names() const;  ///< the test split's attributes
  int64_t expert_count() const;                      ///< experts of the first mode (N)
  int64_t train_samples() const;
  int64_t test_samples() const;

  /// The edit for `task` (BiasStudy::make_edit): ā from the training subpopulation, λ = ±N
  /// toward the under-predicted label unless given; blind = the blind-threshold baseline.
  LogitEdit propose(const BiasTask& task, std::optional<double> lambda = {}, bool blind = false) const;
  /// The model with `edits` applied live, on the test split (vector operations only); named
  /// edited_model_name(edits.size()), MRS unset.
  VariantMetrics evaluate(const BiasTask& task, const std::vector<LogitEdit>& edits) const;
  /// What a λ slider shows, and what `mumoe rewrite --session` prints (compare_rewrite): the
  /// proposed edit for `task` (λ replaced when given) against the applied edits of the stack.
  RewriteComparison preview(const BiasTask& task, std::optional<double> lambda = {}) const;
  /// The blind-threshold baseline on top of the applied edits, MRS against them.
  VariantMetrics blind_threshold(const BiasTask& task) const;
  /// The most under-served subpopulation, the default task of a new study: over every output o
  /// and every sensitive attribute s (the attributes that are not outputs; all others when every
  /// attribute is an output), the non-empty cell o = t ∧ s = v whose accuracy of output o on the
  /// test split is lowest with `edits` applied. Ties keep the first in the order outputs,
  /// attributes, t = 1 before 0, v = 1 before 0. Throws UsageError when no output has such a cell.
  BiasTask worst_cell_task(const std::vector<LogitEdit>& edits = {}) const;
  /// The oversampling baseline (a retrained copy of the layer; seconds, not ms), MRS against the
  /// applied edits.
  VariantMetrics oversample(const BiasTask& task, const OversampleOptions& options = {},
                            int64_t* repeat_factor = nullptr) const;

  /// The edit stack; every change is saved to the session database at once.
  const EditStack& stack() const;
  void push(LogitEdit edit);
  void undo();  ///< throws UsageError when there is nothing to undo
  void redo();  ///< throws UsageError when there is nothing to redo
  void clear();

  /// The shareable report of `task` (editing/bias_report.h): the bias table of the model as
  /// opened, with the applied edits, and the baselines when asked — what `mumoe report MODEL
  /// --target … --sensitive … --session DB` writes for the same session.
  report::ExpertReport report(const BiasTask& task, const BiasReportRequest& request) const;

  /// Folds the applied edits into the weights, writes and verifies the file (model_export.h).
  /// Throws UsageError (existing destination, no edits), WriteError, Error (verification).
  ExportReport export_model(const ExportRequest& request,
                                const std::function<bool(uint64_t, uint64_t)>& progress = {}) const;

 private:
  struct Impl;
  explicit BiasSession(std::unique_ptr<Impl> impl);
  void save();
  /// Applies `change` to the stack and saves it; if saving throws, the stack is put back as it
  /// was (memory and database stay in step) and the error rethrown.
  void change_stack(const std::function<void(EditStack&)>& change);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mumoe::editing
