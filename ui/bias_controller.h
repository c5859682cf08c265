// BiasController: the Bias page's work, without widgets — the editing::BiasSession on the
// page's WorkerQueue, and the three pieces of state the page would otherwise juggle beside its
// layout:
//   * evaluations of the λ slider, coalesced: while one runs, only the newest request waits
//     (a drag of 25 moves costs two or three evaluations, not 25);
//   * the edit stack: the core's, as it answered, advanced by the apply/undo/redo changes still
//     queued (the worker applies them in the same order, so the two meet); stackChanged() says
//     when the core's own stack changed and "before" must be evaluated again;
//   * baselines (blind threshold, oversampling) and their staleness: dropComparisons() drops the
//     answers of those still running (the task or the stack changed under them), by the queue's
//     one staleness rule (a topic, worker_queue.h).
// Every answer arrives as a typed signal on the GUI thread; failures arrive as the job's own
// signal (open, evaluation, stack change, comparison, export), never as a task-name string.
#pragma once

#include <QObject>
#include <QString>
#include <QStringList>

#include <functional>
#include <memory>
#include <optional>

#include "editing/bias_session.h"
#include "editing/variant_metrics.h"

namespace mumoe::ui {

class WorkerQueue;

/// One evaluation of the λ slider: the edit and the metrics without and with it.
struct BiasEvaluation {
  editing::BiasTask task;
  editing::LogitEdit edit;
  double proposedLambda = 0;       ///< the proposed signed N for `task` (whatever λ `edit` uses)
  editing::VariantMetrics before;  ///< the model with the applied edits
  editing::VariantMetrics after;   ///< … plus `edit`; its MRS is measured against `before`
  double coreMs = 0;
  double latencyMs = 0;            ///< request to answer on the GUI thread
};

/// What an opened session offers the page.
struct BiasOpening {
  QStringList targets, attributes;
  int experts = 0;
  editing::EditStack stack;
  std::optional<editing::BiasTask> initial;  ///< the most under-served cell, when there is one
  double seconds = 0;
};

class BiasController : public QObject {
  Q_OBJECT

 public:
  explicit BiasController(QObject* parent = nullptr);
  /// Cancels and waits for the running job; the session dies after the worker let go of it.
  ~BiasController() override;

  WorkerQueue* worker() const { return worker_; }
  bool hasSession() const { return hasSession_; }

  /// Opens the session on the worker (progress "Computing coefficients"): opened(),
  /// openFailed() or openCancelled() follows. Whatever ran for the previous session is dropped.
  void open(const editing::BiasSessionOptions& options);
  /// Releases the session (another kind of model is open); its answers in flight are dropped.
  void close();

  /// Metrics of `task` at `lambda` (unset: the proposed λ): evaluated() or evaluationFailed().
  void evaluate(const editing::BiasTask& task, std::optional<double> lambda);
  bool isEvaluating() const { return evaluating_; }

  void compareBlind(const editing::BiasTask& task);
  void compareOversample(const editing::BiasTask& task);
  /// Baselines still being computed belong to what was shown before: their answers are dropped.
  void dropComparisons();

  /// The edit stack as shown: the core's, with the changes still queued applied. Equal to the
  /// core's whenever the worker is idle.
  const editing::EditStack& stack() const { return stack_; }
  void apply(const editing::LogitEdit& edit);
  void undo();  ///< nothing when there is nothing to undo
  void redo();

  /// Folds the applied edits into a new model file on the worker (cancellable): exported(),
  /// exportFailed() or exportCancelled().
  void exportModel(const editing::ExportRequest& request);
  /// Writes the report of `task` (BiasSession::report: the bias table of the model, with the
  /// applied edits, and the baselines when `baselines`) to `path` on the worker:
  /// reportExported() or reportFailed().
  void exportReport(const QString& path, const editing::BiasTask& task, bool baselines);

 Q_SIGNALS:
  void opened(const mumoe::ui::BiasOpening& opening);
  void openFailed(const QString& message);
  void openCancelled();
  /// `proposed`: the request left λ to the proposal (the page may fill its slider with it).
  void evaluated(const mumoe::ui::BiasEvaluation& evaluation, bool proposed);
  void evaluationFailed(const QString& message);
  void comparisonReady(const QString& name, const mumoe::editing::VariantMetrics& metrics);
  void comparisonFailed(const QString& message);
  /// stack() changed (a change was queued, or the core answered).
  void stackShown();
  /// The core's own stack changed: "before" (the applied edits) is different now.
  void stackChanged();
  /// The core refused an apply/undo/redo; stack() is read back from the core.
  void stackChangeFailed(const QString& message);
  void exported(const mumoe::editing::ExportReport& report);
  void exportFailed(const QString& message);
  void exportCancelled();
  void reportExported(const QString& path, qint64 bytes);
  void reportFailed(const QString& message);

 private:
  struct Slot;
  struct Request {
    editing::BiasTask task;
    std::optional<double> lambda;
  };
  void submitEvaluation(Request request);
  void submitStackChange(const QString& task, std::function<void(editing::BiasSession&)> change);
  void submitComparison(const QString& task, const std::function<QString(editing::BiasSession&, editing::VariantMetrics&)>& run);
  void resyncStack();
  void setStack(const editing::EditStack& stack);
  void forgetSession();

  WorkerQueue* worker_ = nullptr;
  std::shared_ptr<Slot> slot_;
  bool hasSession_ = false;
  bool evaluating_ = false;
  std::optional<Request> pending_;  ///< the newest evaluation asked for while one ran
  int pendingStackChanges_ = 0;     ///< apply/undo/redo jobs queued and not answered yet
  editing::EditStack stack_;        ///< as shown (queued changes applied)
  editing::EditStack confirmed_;    ///< as the core last answered
};

}  // namespace mumoe::ui
