// The main window: opens a model file (dialog, drag and drop, recent files, the bundled demo)
// and a data set (Data menu, or a data SPEC typed in the toolbar), and shows
//   * Model    — the μMoE layers and provenance of the file (read on the GUI thread: header only);
//   * Experts  — the expert browser and galleries (ExpertsPage);
//   * Ablation — the per-class accuracy change of the last ablation and the full sweep;
//   * Bias     — bias correction of a multi-label model (BiasPage, its own worker thread);
//   * Tokens   — token galleries and ablation of a μMoE GPT's MLP blocks (TokenPage).
//   * Steering — a GPT's text steered by one expert's cluster centre, beside the unsteered text.
//   * Compare  — mean polysemanticity vs N across several models (ModelComparisonPage).
// Multi-label models open on the Bias page and GPTs on the Tokens page (the expert analysis of
// the Experts/Ablation pages is for multi-class classifiers; those pages then say so).
// Everything heavy runs as jobs on the pages' WorkerQueues (the Experts and Ablation pages' on
// the SessionController's), all tracked by one JobMonitor: progress with ETA and Cancel (Esc)
// in the status bar; answers already in the cache appear at once. Settings, window
// layout and recent files persist (QSettings).
// Three files: main_window.cpp (construction, opening models, running analyses, showing their
// results), main_window_menus.cpp (menus, tool bar, choosers, recent files) and
// main_window_views.cpp (pages by model kind, exporting a view, the layout).
#pragma once

#include <QMainWindow>
#include <QString>
#include <QStringList>
#include <QVector>

#include "analysis/ablation_results.h"
#include "model/state_dict_layout.h"

class QAction;
class QComboBox;
class QLabel;
class QMenu;
class QSplitter;
class QTabWidget;
class QTableView;
class QTextBrowser;
class QToolButton;

namespace mumoe::ui {

class AblationChart;
class BiasPage;
class TokenPage;
class SteeringPage;
class TextSessionHost;
class ModelComparisonPage;
class JobMonitor;
class ExpertsPage;
class ModelOverviewModel;
class SessionController;
class SweepChart;
class ThumbnailStore;
struct AnswerTiming;
struct SessionInfo;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  enum class Page { Model, Experts, Ablation, Bias, Tokens, Steering, Compare };
  enum class Kind { MultiClass, MultiLabel, Gpt };

  /// `demoModelPath` is what File ▸ Open Demo Model opens ("" hides the action).
  explicit MainWindow(QString demoModelPath = {}, QWidget* parent = nullptr);
  ~MainWindow() override;

  /// Opens a model file and starts its analysis on the current data set. On failure the current
  /// model stays open, lastError() names the file and the problem, and (if enabled) an error
  /// dialog shows it. Never throws. Returns once the file's header is read; the analysis
  /// follows (sessionReady / analysisFailed).
  /// `layer` (optional): the μMoE layer to analyse instead of the first (e.g. a ViT block's
  /// "blocks.3.mlp"); a name the model lacks fails like an unreadable file, naming its layers.
  bool openModel(const QString& path, const QString& layer = {});
  /// Saves how the open model is to be opened (model/open_options.h: preset, heads, TorchScript
  /// backbone, class names, …) beside it, or forgets them, then reopens it. Errors as openModel.
  bool applyModelOptions(const model::LayoutOverrides& options, bool forget = false);
  /// Analyses the open model on another data set (a data SPEC, e.g. "folder:/data/pets").
  void setDataSpec(const QString& spec);
  QString dataSpec() const;
  QString lastError() const { return lastError_; }
  QString currentModelPath() const { return currentPath_; }

  /// Tests and --screenshot turn modal error dialogs off.
  void setErrorDialogsEnabled(bool enabled);
  /// The cache file of sessions opened from now on ("" = the default).
  void setCachePath(const QString& path);

  void showPage(Page page);
  /// Ablates these experts of the current mode (the Ablation page shows the answer).
  void ablate(const QVector<qint64>& experts);
  void runSweep();
  /// Analyses another μMoE layer of the open model (as picking it on the Experts page does; a
  /// ViT block's "blocks.L.mlp" too). False, with lastError() naming the model's layers, when
  /// the open model has no such layer.
  bool analyzeLayer(const QString& layer);
  /// Saves the current page's main chart or gallery (PNG or SVG by suffix). A gallery as PNG is
  /// written whole as a contact sheet on the worker (SessionController::galleryExported follows).
  bool exportCurrentView(const QString& path);

  /// What the open model is (decides which pages analyse it).
  Kind modelKind() const { return kind_; }
  /// Data of the bias page ("" = derived from the data SPEC: biased-fmnist for Fashion-MNIST,
  /// else the SPEC and its ":train" split).
  void setBiasDataSpecs(const QString& testSpec, const QString& trainSpec);
  BiasPage* biasPage() const { return bias_; }
  TokenPage* tokenPage() const { return tokens_; }
  SteeringPage* steeringPage() const { return steering_; }
  /// Analysis ▸ Cancel Job (Esc): cancels the running jobs of every page; enabled while one runs.
  QAction* cancelAction() const { return cancelAction_; }
  /// Edit ▸ Undo Edit / Redo Edit (Ctrl+Z / Ctrl+Shift+Z): the model's edit stack, from any page.
  QAction* undoEditAction() const { return undoEditAction_; }
  QAction* redoEditAction() const { return redoEditAction_; }
  ModelComparisonPage* comparisonPage() const { return comparison_; }
  ModelOverviewModel* overviewModel() const { return overview_; }
  QTableView* layerTable() const { return table_; }
  QTextBrowser* detailsView() const { return details_; }
  SessionController* controller() const { return controller_; }
  ThumbnailStore* thumbnails() const { return thumbnails_; }
  ExpertsPage* expertsPage() const { return experts_; }
  AblationChart* ablationChart() const { return ablationChart_; }
  SweepChart* sweepChart() const { return sweepChart_; }
  QTabWidget* tabs() const { return tabs_; }

 Q_SIGNALS:
  void modelOpened(const QString& path);
  /// The analysis session is ready (extracted or found in the cache).
  void sessionReady();
  void analysisFailed(const QString& message);

 protected:
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;
  void closeEvent(QCloseEvent* event) override;

 private:
  void buildActions();
  void buildToolBar();
  void buildStatusBar();
  void connectController();
  void startAnalysis();
  void chooseAndOpenModel();
  void editModelOptions();
  void chooseDataFolder();
  void chooseFeatureFile();
  void chooseExport();
  void chooseExportReport();
  /// File ▸ Export Model Without Selected Experts…: the Experts page's selection, removed for good.
  void chooseExportWithoutExperts();
  void showLayerDetails();
  void rememberRecent(const QString& path);
  void rebuildRecentMenu();
  void showError(const QString& title, const QString& message);
  void onSessionOpened(const SessionInfo& info);
  void saveLayout() const;
  void restoreLayout();
  bool showPagesForKind();  ///< main_window_views.cpp
  void showReportSaved(const QString& path, int sections, qint64 bytes);

  /// The QSettings key of the last data SPEC that opened.
  static constexpr const char* kDataSettingsKey = "dataSpec";
  static constexpr const char* kRecentDataKey = "recentDataSpecs";
  /// A SPEC that opened: the next start's default, and kept in the box's list (8 at most).
  void rememberDataSpec(const QString& spec);

  QString demoModelPath_;
  QString currentPath_;
  QString lastError_;
  QString analysedLayer_;  ///< the layer the last analysis was started for ("" = the only one)
  bool errorDialogs_ = true;
  SessionController* controller_ = nullptr;
  JobMonitor* monitor_ = nullptr;  ///< every page's queue: busy state, progress, ETA, Cancel
  ThumbnailStore* thumbnails_ = nullptr;
  ModelOverviewModel* overview_ = nullptr;
  QTableView* table_ = nullptr;
  QTextBrowser* details_ = nullptr;
  QTabWidget* tabs_ = nullptr;
  ExpertsPage* experts_ = nullptr;
  AblationChart* ablationChart_ = nullptr;
  SweepChart* sweepChart_ = nullptr;
  QSplitter* ablationSplitter_ = nullptr;
  QSplitter* modelSplitter_ = nullptr;
  QComboBox* dataCombo_ = nullptr;
  QLabel* statusLabel_ = nullptr;
  QMenu* recentMenu_ = nullptr;
  QAction* openAction_ = nullptr;
  QAction* demoAction_ = nullptr;
  QAction* reloadAction_ = nullptr;
  QAction* ablateAction_ = nullptr;
  QAction* sweepAction_ = nullptr;
  QAction* cancelAction_ = nullptr;
  QAction* undoEditAction_ = nullptr;
  QAction* redoEditAction_ = nullptr;
  QAction* exportAction_ = nullptr;
  QAction* reportAction_ = nullptr;
  QAction* removalAction_ = nullptr;
  QAction* modelOptionsAction_ = nullptr;
  BiasPage* bias_ = nullptr;
  TokenPage* tokens_ = nullptr;
  SteeringPage* steering_ = nullptr;
  TextSessionHost* textSessions_ = nullptr;  ///< the Tokens and Steering pages' session and queue
  ModelComparisonPage* comparison_ = nullptr;
  Kind kind_ = Kind::MultiClass;
  QString biasTestSpec_, biasTrainSpec_;
  bool openingModel_ = false;  ///< startAnalysis() runs for a model just opened (not new data)
  /// A GPT's or multi-label model's pages read their own data, which the box then shows (a GPT's
  /// greyed); the SPEC the user had chosen is kept, for the next multi-class model and as the next
  /// start's default. Choosing data (setDataSpec) makes the choice the box's again.
  bool boxForced_ = false;
  QString imageDataSpec_;
  QString appliedDataSpec_;  ///< what the box showed when the pages last opened on their data
  /// The data SPEC the user chose: the box's, or the one kept while the box is forced.
  QString chosenDataSpec() const { return boxForced_ ? imageDataSpec_ : dataSpec(); }
  void startBias();
  /// The data a multi-label model's pages read (Bias, Experts, Ablation): the Bias test SPEC set
  /// for it, else the data box's — or biased-fmnist:test for the box's Fashion-MNIST, which has no
  /// attributes.
  QString multilabelTestSpec() const;
  /// The box for the open model's kind (main_window_data.cpp): what its pages read.
  void showDataOfKind();
  /// The Bias or Tokens page could not open its session (the page shows why).
  void pageFailedToOpen(const QString& message);
  analysis::ClassAccuracy accuracy_;
  QStringList classNames_;
};

}  // namespace mumoe::ui
