// BiasPage: bias correction of a multi-label model (spec §5). The page lays out and shows; its
// BiasController (bias_controller.h) runs the torch-free editing::BiasSession on the page's
// worker thread, coalesces evaluations and keeps the edit stack.
//
//   * task: target output, sensitive attribute and subpopulation (the four cells of
//     target × sensitive, or a free predicate typed into the combo box); it starts on the most
//     under-served cell (BiasSession::worst_cell_task);
//   * λ slider (−2N … 2N, starting at the proposed signed N) with live metrics — target
//     subpopulation accuracy, equality of opportunity, STD bias, Max-Min, target and test
//     accuracy, MRS — before (the applied edits) / after (plus this edit) / difference, the
//     four cell accuracies as a table and a before/after bar chart; "Blind threshold" and
//     "Oversample" add the baselines as comparison columns (shown by BiasResultsView);
//   * "Apply edit" pushes onto the core's EditStack, which the session saves in SQLite at every
//     change (edits survive reopening); undoAction()/redoAction() (the page's buttons, and the
//     main window's Edit menu with Ctrl+Z / Ctrl+Shift+Z from any page) undo and redo there;
//   * "Export…" folds the applied edits into a new model file on the worker and shows the
//     verification (max |difference| on N test samples).
// λ requests are coalesced (by the controller): while one evaluation runs only the newest
// pending one follows.
#pragma once

#include <QMap>
#include <QString>
#include <QStringList>
#include <QWidget>

#include <functional>
#include <memory>
#include <optional>

#include "bias_controller.h"
#include "bias_results_view.h"
#include "editing/bias_session.h"

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QListWidget;
class QPushButton;
class QSlider;
class QTableWidget;
class QAction;

namespace mumoe::ui {

class NoteStack;
class WorkerQueue;

class BiasPage : public QWidget {
  Q_OBJECT

 public:
  explicit BiasPage(QWidget* parent = nullptr);
  ~BiasPage() override;

  /// Opens the bias session on the worker (progress through worker()); opened() or failed().
  /// `cachePath`: the analysis cache that keeps the layer's per-sample arrays ("" = the default),
  /// so that reopening the same model and data is a cache read.
  void open(const QString& modelPath, const QString& testSpec, const QString& trainSpec, const QString& sessionDb = {},
            const QString& cachePath = {});
  /// No session: shows `html` (e.g. why a multi-class model has no bias page) instead.
  void showNote(const QString& html);
  bool hasSession() const;
  QString modelPath() const { return modelPath_; }
  void setErrorDialogsEnabled(bool enabled) { errorDialogs_ = enabled; }

  // Controls (tests drive them).
  QComboBox* targetCombo() const { return target_; }
  QComboBox* sensitiveCombo() const { return sensitive_; }
  QComboBox* cellCombo() const { return cell_; }
  QSlider* lambdaSlider() const { return slider_; }
  QDoubleSpinBox* lambdaSpin() const { return lambdaSpin_; }
  QTableWidget* metricsTable() const { return results_->metricsTable(); }
  QTableWidget* cellsTable() const { return results_->cellsTable(); }
  QTableWidget* cellTable() const { return results_->cellTable(); }
  QListWidget* editsList() const { return edits_; }
  /// Undo / Redo of the last applied / undone edit; their texts name it.
  QAction* undoAction() const { return undoAction_; }
  QAction* redoAction() const { return redoAction_; }
  QChartView* chartView() const { return results_->chartView(); }
  QLabel* exportResultLabel() const { return exportResult_; }
  WorkerQueue* worker() const;

  double proposedLambda() const { return proposed_; }
  /// Sets λ (the spin box and slider follow) and asks for its metrics.
  void setLambda(double lambda);
  const std::optional<BiasEvaluation>& evaluation() const { return evaluation_; }
  /// The edit stack as shown: the core's, with the changes still queued on the worker applied.
  /// Equal to the core's whenever the worker is idle.
  const editing::EditStack& coreStack() const;
  int expertCount() const { return experts_; }

  void applyEdit();
  void undoEdit();
  void redoEdit();
  void compareBlind();
  void compareOversample();
  /// Runs the export on the worker; exportFinished() follows.
  void exportModel(const editing::ExportRequest& request);
  /// The Export… dialog (bias_export_dialog.h), then exportModel().
  void chooseExport();
  /// File ▸ Export Report…: the bias table of the task chosen here (the model, its applied edits,
  /// and the baselines when the page has compared them), as `mumoe report` writes it;
  /// reportExported() or failed().
  void exportReport(const QString& path);

 Q_SIGNALS:
  void opened();
  void evaluated();
  void stackChanged();
  void comparisonReady(const QString& name);
  void exportFinished(bool ok, const QString& message);
  void reportExported(const QString& path, qint64 bytes);
  /// Any job failed (task = its display name); the page has shown the error where it belongs.
  void failed(const QString& task, const QString& message);
  /// Opening the session failed: the page shows why instead of the controls.
  void openFailed(const QString& message);

 private:
  QWidget* buildControls();
  void connectController();
  void onOpened(const BiasOpening& opening);
  /// Lists the sensitive attributes for the target; selects `preferred` ("" = keep the current one).
  void fillSensitive(const QString& preferred = {});
  void fillCells();
  void taskChanged();
  std::optional<editing::BiasTask> currentTask(QString* error = nullptr) const;
  void requestEvaluation();
  void onEvaluated(const BiasEvaluation& evaluation, bool proposed);
  void showEvaluation();
  void clearComparisons();
  /// The controller's stack in the list, the actions and the Export button.
  void showStack();
  void onSliderMoved(int value);
  void onSpinChanged(double value);
  void showErrorDialog(const QString& message);

  BiasController* controller_ = nullptr;
  bool errorDialogs_ = true;
  QString modelPath_;
  QString testSpec_;
  int experts_ = 0;
  double proposed_ = 0;
  std::optional<double> lambda_;  ///< unset: propose (the task changed)
  /// The order of the user's actions: when λ was last set and when an apply/undo/redo was last
  /// asked, so that a stack change answered later resets λ only if the user has not set it since.
  quint64 actions_ = 0, lambdaSetAt_ = 0, stackAskedAt_ = 0;
  std::optional<BiasEvaluation> evaluation_;  ///< the last one shown
  QStringList targets_, attributes_;
  QMap<QString, editing::VariantMetrics> comparisons_;

  NoteStack* pages_ = nullptr;
  QLabel* header_ = nullptr;
  QComboBox* target_ = nullptr;
  QComboBox* sensitive_ = nullptr;
  QComboBox* cell_ = nullptr;
  QSlider* slider_ = nullptr;
  QDoubleSpinBox* lambdaSpin_ = nullptr;
  QLabel* lambdaNote_ = nullptr;
  QLabel* editText_ = nullptr;
  QPushButton* proposeButton_ = nullptr;
  QPushButton* blindButton_ = nullptr;
  QPushButton* oversampleButton_ = nullptr;
  QPushButton* applyButton_ = nullptr;
  QPushButton* exportButton_ = nullptr;
  QListWidget* edits_ = nullptr;
  QAction* undoAction_ = nullptr;
  QAction* redoAction_ = nullptr;
  BiasResultsView* results_ = nullptr;
  QLabel* exportResult_ = nullptr;
};

}  // namespace mumoe::ui
