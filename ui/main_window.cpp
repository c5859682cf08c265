#include "main_window.h"

#include <QAction>
#include <QChartView>
#include <QCheckBox>
#include <QListView>
#include <QApplication>
#include <QCloseEvent>
#include <QDir>
#include <QComboBox>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QHeaderView>
#include <QInputDialog>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QPixmapCache>
#include <QSettings>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStatusBar>
#include <QStyle>
#include <QTabWidget>
#include <QTableView>
#include <QTextBrowser>
#include <QToolBar>
#include <QToolButton>

#include <exception>

#include "ablation_chart.h"
#include "bias_page.h"
#include "editing/bias_session.h"
#include "gallery_model.h"
#include "model/manifest.h"
#include "model_comparison_page.h"
#include "steering_page.h"
#include "token_page.h"
#include "worker_queue.h"
#include "expert_table_model.h"
#include "experts_page.h"
#include "format.h"
#include "gallery_view.h"
#include "job_monitor.h"
#include "job_progress_widget.h"
#include "io/file_checks.h"
#include "model/open_options.h"
#include "model_options_dialog.h"
#include "model_details.h"
#include "model_overview_model.h"
#include "sample_detail.h"
#include "session_controller.h"
#include "sweep_chart.h"
#include "thumbnail_store.h"
#include "widget_export.h"

namespace mumoe::ui {
namespace {

constexpr int kMaxRecentFiles = 8;
const char* kRecentKey = "recentFiles";
const char* kDataKey = "dataSpec";

}  // namespace

MainWindow::MainWindow(QString demoModelPath, QWidget* parent)
    : QMainWindow(parent), demoModelPath_(std::move(demoModelPath)) {
  setWindowTitle(tr("mumoe-studio"));
  setAcceptDrops(true);
  QPixmapCache::setCacheLimit(std::max(QPixmapCache::cacheLimit(), 48 * 1024));  // KiB: ~1,500 thumbnails

  controller_ = new SessionController(this);
  monitor_ = new JobMonitor(this);
  thumbnails_ = new ThumbnailStore(64LL << 20, this);

  // Model page: the layers of the file and its provenance.
  overview_ = new ModelOverviewModel(this);
  auto* proxy = new QSortFilterProxyModel(this);
  proxy->setSourceModel(overview_);
  proxy->setSortRole(ModelOverviewModel::SortRole);
  table_ = new QTableView;
  table_->setModel(proxy);
  table_->setSortingEnabled(true);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->setAlternatingRowColors(true);
  table_->verticalHeader()->hide();
  table_->horizontalHeader()->setStretchLastSection(false);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setSectionResizeMode(ModelOverviewModel::Gating, QHeaderView::Stretch);
  details_ = new QTextBrowser;
  details_->setOpenLinks(false);
  details_->setPlaceholderText(tr("Open a model (File ▸ Open, or drop a .safetensors or .pth file here)."));
  modelSplitter_ = new QSplitter(Qt::Vertical);
  modelSplitter_->setObjectName(QStringLiteral("modelSplitter"));
  modelSplitter_->addWidget(table_);
  modelSplitter_->addWidget(details_);
  modelSplitter_->setStretchFactor(0, 1);
  modelSplitter_->setStretchFactor(1, 2);

  // Experts page and Ablation page.
  experts_ = new ExpertsPage(thumbnails_);
  ablationChart_ = new AblationChart;
  sweepChart_ = new SweepChart;
  ablationSplitter_ = new QSplitter(Qt::Vertical);
  ablationSplitter_->setObjectName(QStringLiteral("ablationSplitter"));
  ablationSplitter_->addWidget(ablationChart_);
  ablationSplitter_->addWidget(sweepChart_);
  ablationSplitter_->setContentsMargins(4, 4, 4, 4);

  tabs_ = new QTabWidget;
  tabs_->setDocumentMode(true);
  tabs_->addTab(modelSplitter_, tr("Model"));
  tabs_->addTab(experts_, tr("Experts"));
  tabs_->addTab(ablationSplitter_, tr("Ablation"));
  bias_ = new BiasPage;
  tokens_ = new TokenPage;
  tabs_->addTab(bias_, tr("Bias"));
  tabs_->addTab(tokens_, tr("Tokens"));
  steering_ = new SteeringPage;
  steering_->setEnabled(false);  // until a GPT is opened
  tabs_->addTab(steering_, tr("Steering"));
  comparison_ = new ModelComparisonPage;
  tabs_->addTab(comparison_, tr("Compare"));
  setCentralWidget(tabs_);

  connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this] { showLayerDetails(); });
  buildActions();
  buildToolBar();
  buildStatusBar();
  connectController();
  // Every page's jobs in one monitor: the progress bar, the ETA and Esc reach all of them.
  monitor_->track(controller_->worker());
  monitor_->track(bias_->worker());
  monitor_->track(tokens_->worker());
  monitor_->track(comparison_->worker());
  monitor_->track(steering_->worker());
  connect(monitor_, &JobMonitor::failed, this, [this](const QString& task, const QString& message) {
    statusBar()->showMessage(tr("%1 failed: %2").arg(task, message), 10000);
  });
  connect(monitor_, &JobMonitor::cancelled, this,
          [this](const QString& task) { statusBar()->showMessage(tr("Cancelled: %1").arg(task), 6000); });
  // A page that could not open its session: the model's analysis is unavailable.
  connect(bias_, &BiasPage::openFailed, this, &MainWindow::pageFailedToOpen);
  connect(tokens_, &TokenPage::openFailed, this, &MainWindow::pageFailedToOpen);
  // Steering starts from the expert the Tokens page shows (the most loaded one when it opens),
  // never from an arbitrary expert 0 that may be dead.
  connect(tokens_, &TokenPage::expertSelected, this, [this](int block, qint64 expert) {
    steering_->setLayer(block);
    steering_->setExpert(static_cast<int>(expert));
  });
  connect(bias_, &BiasPage::opened, this, [this] {
    QSettings().setValue(kDataKey, dataSpec());  // it opened: remember the SPEC
    statusLabel_->setText(tr("%1 · bias correction ready").arg(QFileInfo(currentPath_).fileName()));
  });
  connect(tokens_, &TokenPage::opened, this, [this] {
    statusLabel_->setText(tr("%1 · token view ready").arg(QFileInfo(currentPath_).fileName()));
  });
  restoreLayout();
  comparison_->setData(dataSpec(), controller_->cachePath());
}

MainWindow::~MainWindow() {
  // The pages finish their queues' jobs in their destructors, inside ~QWidget, when this window
  // is half destroyed: no answer, failure or busy signal may reach it from then on.
  monitor_->detachAll();
  disconnect(monitor_, nullptr, this, nullptr);
  disconnect(controller_, nullptr, this, nullptr);
}

void MainWindow::buildActions() {
  auto* style = QApplication::style();
  auto* file = menuBar()->addMenu(tr("&File"));
  openAction_ = file->addAction(style->standardIcon(QStyle::SP_DialogOpenButton), tr("&Open Model…"), this,
                                &MainWindow::chooseAndOpenModel);
  openAction_->setShortcut(QKeySequence::Open);
  if (!demoModelPath_.isEmpty()) {
    demoAction_ = file->addAction(style->standardIcon(QStyle::SP_ComputerIcon), tr("Open &Demo Model"), this,
                                  [this] {
                                    // The demo reads Fashion-MNIST: a data set chosen for another
                                    // model (a folder of 248-px photos) would fail on it.
                                    dataCombo_->setCurrentText(QStringLiteral("fashion-mnist:test"));
                                    comparison_->setData(dataSpec(), controller_->cachePath());
                                    openModel(demoModelPath_);
                                  });
    demoAction_->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_D));
  }
  recentMenu_ = file->addMenu(tr("Open &Recent"));
  rebuildRecentMenu();
  modelOptionsAction_ = file->addAction(tr("Model &Options…"), this, &MainWindow::editModelOptions);
  modelOptionsAction_->setToolTip(
      tr("How to open this model: backbone preset, attention heads, TorchScript backbone, class names, gate "
         "activation — saved beside it for every page and the command line"));
  modelOptionsAction_->setEnabled(false);
  file->addSeparator();
  exportAction_ = file->addAction(style->standardIcon(QStyle::SP_DialogSaveButton), tr("&Export View…"), this,
                                  &MainWindow::chooseExport);
  exportAction_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_E));
  exportAction_->setToolTip(tr("Save the gallery or chart of this page as PNG or SVG (Ctrl+E)"));
  reportAction_ = file->addAction(tr("Export &Report…"), this, &MainWindow::chooseExportReport);
  reportAction_->setToolTip(tr("One self-contained HTML file of this layer's experts (table, galleries, charts) "
                               "that opens in any browser — as `mumoe report` writes it"));
  reportAction_->setEnabled(false);
  removalAction_ = file->addAction(tr("Export Model &Without Selected Experts…"), this,
                                   &MainWindow::chooseExportWithoutExperts);
  removalAction_->setToolTip(tr("Write the model with the selected experts removed for good (their weights zeroed: "
                                "what Ablate measured), in your own file layout, verified before it is saved"));
  removalAction_->setEnabled(false);
  file->addSeparator();
  auto* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
  quit->setShortcut(QKeySequence::Quit);

  auto* data = menuBar()->addMenu(tr("&Data"));
  data->addAction(tr("Fashion-MNIST &Test Set"), this, [this] { setDataSpec(QStringLiteral("fashion-mnist:test")); });
  data->addAction(tr("Fashion-MNIST T&raining Set"), this, [this] { setDataSpec(QStringLiteral("fashion-mnist:train")); });
  data->addAction(tr("&Biased Fashion-MNIST (test)"), this, [this] { setDataSpec(QStringLiteral("biased-fmnist:test")); });
  data->addSeparator();
  data->addAction(tr("Image &Folder…"), this, &MainWindow::chooseDataFolder);
  data->addAction(tr("F&eature File…"), this, &MainWindow::chooseFeatureFile);
  data->addAction(tr("Data &SPEC…"), this, [this] {
    bool ok = false;
    const QString spec = QInputDialog::getText(this, tr("Data set"),
                                               tr("Data SPEC (fashion-mnist:test, idx:DIR:test, folder:DIR, "
                                                  "celeba:DIR:test, features:FILE):"),
                                               QLineEdit::Normal, dataSpec(), &ok);
    if (ok && !spec.trimmed().isEmpty()) setDataSpec(spec.trimmed());
  });

  // Edit: the model's edit stack (the core's, saved at every change), undoable from any page;
  // the texts name the edit ("Undo long_sleeves += …"). The Bias page's buttons are the same
  // two actions, so the keys have one owner.
  auto* edit = menuBar()->addMenu(tr("&Edit"));
  undoEditAction_ = bias_->undoAction();
  undoEditAction_->setShortcut(QKeySequence::Undo);
  redoEditAction_ = bias_->redoAction();
  // Ctrl+Shift+Z and Ctrl+Y, each once: the platform's Redo binding is often Ctrl+Shift+Z itself, and
  // one key listed twice on an action is an "ambiguous shortcut" that Qt then never fires.
  QList<QKeySequence> redoKeys = {QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_Z), QKeySequence(Qt::CTRL | Qt::Key_Y)};
  for (const auto& key : QKeySequence::keyBindings(QKeySequence::Redo))
    if (!redoKeys.contains(key)) redoKeys << key;
  redoEditAction_->setShortcuts(redoKeys);
  edit->addAction(undoEditAction_);
  edit->addAction(redoEditAction_);

  auto* analysis = menuBar()->addMenu(tr("&Analysis"));
  reloadAction_ = analysis->addAction(style->standardIcon(QStyle::SP_BrowserReload), tr("&Analyze"), this,
                                      &MainWindow::startAnalysis);
  reloadAction_->setShortcut(QKeySequence::Refresh);
  reloadAction_->setToolTip(tr("Open the model on the data set, extracting what the cache lacks (F5)"));
  ablateAction_ = analysis->addAction(style->standardIcon(QStyle::SP_MediaPlay), tr("A&blate Selected Experts"), this,
                                      [this] {
                                        // A GPT's experts live on the Tokens page, one at a time.
                                        if (kind_ == Kind::Gpt) {
                                          if (tokens_->currentExpert() < 0) {
                                            statusBar()->showMessage(tr("Select an expert on the Tokens page"), 5000);
                                            return;
                                          }
                                          showPage(Page::Tokens);
                                          tokens_->ablate(tokens_->currentExpert());
                                          return;
                                        }
                                        ablate(experts_->selectedExperts());
                                      });
  ablateAction_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Return));
  ablateAction_->setToolTip(tr("Remove the selected experts together and show the per-class accuracy change (Ctrl+Return)"));
  sweepAction_ = analysis->addAction(style->standardIcon(QStyle::SP_MediaSeekForward), tr("Run &Sweep"), this,
                                     &MainWindow::runSweep);
  sweepAction_->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_Return));
  sweepAction_->setToolTip(tr("Remove every expert in turn (Ctrl+Shift+Return)"));
  cancelAction_ = analysis->addAction(style->standardIcon(QStyle::SP_BrowserStop), tr("&Cancel Job"), monitor_,
                                      &JobMonitor::cancelAll);
  cancelAction_->setShortcut(QKeySequence(Qt::Key_Escape));

  auto* view = menuBar()->addMenu(tr("&View"));
  view->addAction(tr("&Model"), this, [this] { showPage(Page::Model); })->setShortcut(QKeySequence(Qt::ALT | Qt::Key_1));
  view->addAction(tr("&Experts"), this, [this] { showPage(Page::Experts); })->setShortcut(QKeySequence(Qt::ALT | Qt::Key_2));
  view->addAction(tr("&Ablation"), this, [this] { showPage(Page::Ablation); })->setShortcut(QKeySequence(Qt::ALT | Qt::Key_3));
  view->addAction(tr("&Bias"), this, [this] { showPage(Page::Bias); })->setShortcut(QKeySequence(Qt::ALT | Qt::Key_4));
  view->addAction(tr("&Tokens"), this, [this] { showPage(Page::Tokens); })->setShortcut(QKeySequence(Qt::ALT | Qt::Key_5));
  view->addAction(tr("&Steering"), this, [this] { showPage(Page::Steering); })
      ->setShortcut(QKeySequence(Qt::ALT | Qt::Key_6));
  view->addAction(tr("&Compare Models"), this, [this] { showPage(Page::Compare); })
      ->setShortcut(QKeySequence(Qt::ALT | Qt::Key_7));
  view->addSeparator();
  auto* hideDead = view->addAction(tr("&Hide Dead Experts"));
  hideDead->setCheckable(true);
  connect(hideDead, &QAction::toggled, experts_->hideDeadBox(), &QAbstractButton::setChecked);
  connect(experts_->hideDeadBox(), &QAbstractButton::toggled, hideDead, &QAction::setChecked);
  auto* find = view->addAction(tr("&Filter Experts"), this, [this] {
    showPage(Page::Experts);
    experts_->filterEdit()->setFocus();
    experts_->filterEdit()->selectAll();
  });
  find->setShortcut(QKeySequence::Find);

  auto* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("&About mumoe-studio"), this, [this] {
    QMessageBox::about(this, tr("About mumoe-studio"),
                       tr("<b>mumoe-studio</b><br>Inspect, test and edit Multilinear "
                          "Mixture-of-Experts (μMoE) models."));
  });
}

void MainWindow::buildToolBar() {
  auto* bar = addToolBar(tr("Main"));
  bar->setObjectName(QStringLiteral("mainToolBar"));
  bar->setMovable(false);
  bar->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  bar->addAction(openAction_);
  bar->addSeparator();
  bar->addWidget(new QLabel(tr(" Data ")));
  dataCombo_ = new QComboBox;
  dataCombo_->setEditable(true);
  dataCombo_->setMinimumContentsLength(22);
  dataCombo_->setInsertPolicy(QComboBox::NoInsert);
  dataCombo_->addItems({QStringLiteral("fashion-mnist:test"), QStringLiteral("fashion-mnist:train"),
                        QStringLiteral("biased-fmnist:test")});
  dataCombo_->setObjectName(QStringLiteral("dataSpec"));
  dataCombo_->setToolTip(tr("Data SPEC: fashion-mnist:test, idx:DIR:test, folder:DIR, celeba:DIR:test, features:FILE"));
  dataCombo_->setCurrentText(QSettings().value(kDataKey, QStringLiteral("fashion-mnist:test")).toString());
  connect(dataCombo_, &QComboBox::activated, this, [this] { setDataSpec(dataCombo_->currentText()); });
  connect(dataCombo_->lineEdit(), &QLineEdit::returnPressed, this, [this] { setDataSpec(dataCombo_->currentText()); });
  bar->addWidget(dataCombo_);
  bar->addAction(reloadAction_);
  bar->addSeparator();
  bar->addAction(ablateAction_);
  bar->addAction(sweepAction_);
  bar->addAction(cancelAction_);
  bar->addSeparator();
  bar->addAction(exportAction_);
}

void MainWindow::buildStatusBar() {
  statusLabel_ = new QLabel(tr("No model open"));
  statusBar()->addWidget(statusLabel_, 1);
  statusBar()->addPermanentWidget(new JobProgressWidget(monitor_, cancelAction_));
}

void MainWindow::connectController() {
  auto* c = controller_;
  connect(c, &SessionController::sessionOpened, this, &MainWindow::onSessionOpened);
  connect(c, &SessionController::statisticsReady, this,
          [this](const analysis::ModeStatistics& s, const AnswerTiming&) { experts_->setStatistics(s); });
  connect(c, &SessionController::sweepReady, this, [this](const analysis::SweepOutcome& s, const AnswerTiming&) {
    experts_->setSweep(s, accuracy_);
    sweepChart_->setSweep(s, accuracy_);
  });
  connect(c, &SessionController::galleryReady, this, [this](const analysis::Gallery& g, const AnswerTiming& t) {
    experts_->gallery()->setGallery(g, classNames_, t);
  });
  connect(c, &SessionController::ablationReady, this, [this](const analysis::AblationOutcome& o, const AnswerTiming& t) {
    ablationChart_->setOutcome(o, accuracy_, classNames_, t);
    statusBar()->showMessage(t.fromCache ? tr("Ablation from the cache in %1 ms").arg(t.latencyMs, 0, 'f', 1)
                                         : tr("Ablation computed in %1 ms").arg(t.latencyMs, 0, 'f', 0),
                             8000);
  });
  connect(c, &SessionController::coefficientsReady, this, [this](qint64, qint64 sample, const QVector<double>& a) {
    experts_->gallery()->detail()->setCoefficients(sample, a);
  });
  connect(c, &SessionController::imagesReady, thumbnails_, &ThumbnailStore::insert);
  connect(c, &SessionController::galleryExported, this, [this](const QString& path, int images) {
    statusBar()->showMessage(tr("Saved %1 (%2 images)").arg(path).arg(images), 8000);
  });
  connect(c, &SessionController::reportExported, this, [this](const QString& path, int sections, qint64 bytes) {
    statusBar()->showMessage(
        tr("Saved the report %1 (%2 experts in detail, %3 KiB)").arg(path).arg(sections).arg(bytes / 1024), 8000);
  });
  connect(c, &SessionController::modelExported, this, [this](const QString& path, const QString& summary) {
    statusBar()->showMessage(tr("Saved %1 (%2)").arg(path, summary), 12000);
  });
  connect(thumbnails_, &ThumbnailStore::imagesWanted, c, &SessionController::requestImages);
  connect(c, &SessionController::openFailed, this, [this](const QString& message) {
    experts_->setMessage(tr("<b style='color:#c62828'>Analysis unavailable:</b> %1").arg(message.toHtmlEscaped()));
    statusLabel_->setText(tr("Analysis unavailable — %1").arg(message));
    lastError_ = message;
    Q_EMIT analysisFailed(message);
    showError(tr("Cannot analyse this model"), message);
  });
  connect(c, &SessionController::openCancelled, this, [this] {
    // Replace "Opening …", which would otherwise stay.
    experts_->setMessage(model::backbone_layer_step(analysedLayer_.toStdString())
                             ? tr("<i>Analysis cancelled. Press Analyze (F5) to start it again (a backbone layer's "
                                  "analysis is not cached: it starts from the first image).</i>")
                             : tr("<i>Analysis cancelled. Press Analyze (F5) to start it again; what was extracted "
                                  "is kept in the cache.</i>"));
    statusLabel_->setText(tr("%1 · analysis cancelled").arg(QFileInfo(currentPath_).fileName()));
  });
  connect(c, &SessionController::jobFailed, this, [this](const QString& task, const QString& message) {
    showError(tr("%1 failed").arg(task), message);
  });

  connect(experts_, &ExpertsPage::statisticsWanted, this, [this](qint64 mode, double threshold) {
    // A new threshold keeps the table's sweep (it is the mode's); another mode needs its own,
    // at once only where it is cheap (an early ViT block's waits for Run Sweep).
    const bool modeChanged = mode != experts_->model()->statistics().mode || experts_->model()->rowCount() == 0;
    controller_->requestStatistics(mode, threshold);
    if (modeChanged && controller_->info().sweepIsCheap) controller_->requestSweep(mode);
  });
  connect(experts_, &ExpertsPage::ablateRequested, this, &MainWindow::ablate);
  connect(experts_, &ExpertsPage::layerWanted, this, &MainWindow::analyzeLayer);
  connect(experts_->gallery(), &GalleryView::requestChanged, this,
          [this] { controller_->requestGallery(experts_->gallery()->request()); });
  connect(experts_->gallery(), &GalleryView::sampleActivated, this,
          [this](qint64 sample) { controller_->requestCoefficients(experts_->mode(), sample); });
  connect(experts_->gallery(), &GalleryView::exportRequested, this, &MainWindow::chooseExport);
  connect(sweepChart_, &SweepChart::expertClicked, this, [this](qint64 expert) {
    experts_->selectExpert(expert);
    ablate({expert});
  });
}

bool MainWindow::openModel(const QString& path, const QString& layer) {
  model::ModelSummary summary;
  try {
    summary = model::summarize_model_file(path.toStdString());
  } catch (const std::exception& e) {
    lastError_ = QString::fromUtf8(e.what());
    showError(tr("Cannot open model"), lastError_);
    return false;
  }
  int layerRow = 0;
  if (!layer.isEmpty()) {
    QStringList names;
    layerRow = -1;
    for (size_t row = 0; row < summary.layers.size(); ++row) {
      names << QString::fromStdString(summary.layers[row].name);
      if (names.back() == layer) layerRow = static_cast<int>(row);
    }
    if (layerRow < 0) {
      lastError_ = tr("%1 has no layer %2 (layers: %3)").arg(path, layer, names.join(QStringLiteral(", ")));
      showError(tr("Cannot open model"), lastError_);
      return false;
    }
  }
  // The one header read above also tells which pages apply.
  switch (summary.kind) {
    case model::ModelKind::MultiLabel: kind_ = Kind::MultiLabel; break;
    case model::ModelKind::Gpt: kind_ = Kind::Gpt; break;
    default: kind_ = Kind::MultiClass; break;
  }
  lastError_.clear();
  currentPath_ = QFileInfo(path).absoluteFilePath();
  overview_->setSummary(summary);
  setWindowTitle(tr("%1 — mumoe-studio").arg(QFileInfo(path).fileName()));
  // startAnalysis() analyses the layer selected here.
  if (layer.isEmpty()) table_->selectRow(0);
  else
    table_->setCurrentIndex(static_cast<QSortFilterProxyModel*>(table_->model())->mapFromSource(overview_->index(layerRow, 0)));
  showLayerDetails();
  rememberRecent(currentPath_);
  modelOptionsAction_->setEnabled(true);
  Q_EMIT modelOpened(currentPath_);
  startAnalysis();
  return true;
}

void MainWindow::editModelOptions() {
  if (currentPath_.isEmpty()) return;
  ModelOptionsDialog dialog(currentPath_, QString::fromStdString(overview_->summary().backbone_preset), this);
  if (dialog.exec() != QDialog::Accepted) return;
  model::LayoutOverrides options;
  try {
    io::refuse_output_over_inputs((currentPath_ + QStringLiteral(".mumoe.json")).toStdString(), "the model options",
                                  {{dialog.classNamesEdit()->text().trimmed().toStdString(), "the class-name file"}});
    if (!dialog.forgetRequested()) options = dialog.overrides();
  } catch (const std::exception& e) {
    lastError_ = QString::fromUtf8(e.what());
    showError(tr("Cannot read the model options"), lastError_);
    return;
  }
  applyModelOptions(options, dialog.forgetRequested());
}

bool MainWindow::applyModelOptions(const model::LayoutOverrides& options, bool forget) {
  if (currentPath_.isEmpty()) return false;
  try {
    // The header read (and a TorchScript backbone's probe) is as quick as opening the model.
    if (forget) model::forget_open_options(currentPath_.toStdString());
    else model::remember_open_options(currentPath_.toStdString(), options);
  } catch (const std::exception& e) {
    lastError_ = QString::fromUtf8(e.what());
    showError(tr("Cannot save the model options"), lastError_);
    return false;
  }
  return openModel(currentPath_);
}

void MainWindow::setDataSpec(const QString& spec) {
  if (dataCombo_->currentText() != spec) dataCombo_->setCurrentText(spec);
  // Remembered once a session opened on it (onSessionOpened): a SPEC that fails to load must not
  // become the next start's default and fail again.
  comparison_->setData(dataSpec(), controller_->cachePath());
  if (!currentPath_.isEmpty()) startAnalysis();
}

QString MainWindow::dataSpec() const { return dataCombo_->currentText().trimmed(); }

void MainWindow::setCachePath(const QString& path) {
  controller_->setCachePath(path);
  comparison_->setData(dataSpec(), controller_->cachePath());
}

void MainWindow::setErrorDialogsEnabled(bool enabled) {
  errorDialogs_ = enabled;
  bias_->setErrorDialogsEnabled(enabled);
  tokens_->setErrorDialogsEnabled(enabled);
}

void MainWindow::setBiasDataSpecs(const QString& testSpec, const QString& trainSpec) {
  biasTestSpec_ = testSpec;
  biasTrainSpec_ = trainSpec;
}

void MainWindow::pageFailedToOpen(const QString& message) {
  statusLabel_->setText(tr("Unavailable — %1").arg(message));
  lastError_ = message;
  Q_EMIT analysisFailed(message);
}

void MainWindow::startBias() {
  QString test = biasTestSpec_, train = biasTrainSpec_;
  if (test.isEmpty()) {
    // Fashion-MNIST has no attributes: its biased variant is what multi-label models are for.
    test = dataSpec().startsWith(QLatin1String("fashion-mnist")) ? QStringLiteral("biased-fmnist:test") : dataSpec();
  }
  if (train.isEmpty()) {
    // The CLI's default (editing::training_spec_for); where the SPEC names no split, ā comes
    // from the test data itself rather than refusing to open the page.
    const auto named = editing::training_spec_for(test.toStdString());
    train = named ? QString::fromStdString(*named) : test;
  }
  statusLabel_->setText(tr("Opening %1 for bias correction on %2 (training split %3)…").arg(currentPath_, test, train));
  // The edit session database: the core's default, beside the analysis cache.
  bias_->open(currentPath_, test, train, {}, controller_->cachePath());
}

bool MainWindow::analyzeLayer(const QString& layer) {
  // The Model page's selection is what startAnalysis() reads: select the layer's row there.
  const auto& layers = overview_->summary().layers;
  auto* proxy = static_cast<QSortFilterProxyModel*>(table_->model());
  QStringList names;
  for (size_t row = 0; row < layers.size(); ++row) {
    names << QString::fromStdString(layers[row].name);
    if (names.back() == layer) {
      table_->setCurrentIndex(proxy->mapFromSource(overview_->index(static_cast<int>(row), 0)));
      startAnalysis();
      return true;
    }
  }
  lastError_ = tr("%1 has no layer %2 (layers: %3)").arg(currentPath_, layer, names.join(QStringLiteral(", ")));
  return false;
}

void MainWindow::startAnalysis() {
  if (currentPath_.isEmpty()) return;
  reportAction_->setEnabled(false);  // until this model's session is open
  removalAction_->setEnabled(false);
  // A GPT's pages read the validation split of the text it was trained on, not the image data
  // named here: the box is greyed rather than shown as if it applied.
  dataCombo_->setEnabled(kind_ != Kind::Gpt);
  steering_->setEnabled(kind_ == Kind::Gpt);  // steering is for language models only
  sweepAction_->setEnabled(kind_ == Kind::MultiClass);
  if (kind_ != Kind::MultiClass) {
    // The expert analysis of the Experts/Ablation pages is for multi-class classifiers: the
    // previous classifier's session must not answer Run Sweep or Ablate for this model.
    controller_->close();
    thumbnails_->clear();
    experts_->clear();
    ablationChart_->clear();
    sweepChart_->clear();
    const QString name = QFileInfo(currentPath_).fileName().toHtmlEscaped();
    if (kind_ == Kind::MultiLabel) {
      experts_->setMessage(tr("<i>%1 is a multi-label model (one binary output per attribute): the per-class expert "
                              "analysis does not apply. Its bias correction is on the <b>Bias</b> page (Alt+4).</i>")
                               .arg(name));
      tokens_->showNote(tr("<h3>Tokens</h3><p>%1 is not a language model.</p>").arg(name));
      startBias();
      showPage(Page::Bias);
    } else {
      experts_->setMessage(tr("<i>%1 is a μMoE GPT: its experts are on the <b>Tokens</b> page (Alt+5).</i>").arg(name));
      bias_->showNote(tr("<h3>Bias correction</h3><p>%1 is a language model; bias correction works on multi-label "
                         "classifiers.</p>").arg(name));
      const auto& layers = overview_->summary().layers;
      QStringList names;
      for (const auto& l : layers) names << QString::fromStdString(l.name);
      statusLabel_->setText(tr("Opening %1 (μMoE GPT) on its validation split…").arg(currentPath_));
      tokens_->open(currentPath_, names, controller_->cachePath());
      steering_->setEnabled(true);
      steering_->setCachePath(controller_->cachePath());
      steering_->setModel(currentPath_, QString());
      showPage(Page::Tokens);
    }
    return;
  }
  bias_->showNote(tr("<h3>Bias correction</h3><p>%1 is a <b>multi-class</b> classifier (one softmax over its classes). "
                     "Bias correction rewrites one binary output of a <b>multi-label</b> model against a subpopulation "
                     "(target × sensitive attribute), e.g. the bundled <code>biased-fmnist.mumoe.safetensors</code> "
                     "(demo 2): open it to use this page.</p>")
                      .arg(QFileInfo(currentPath_).fileName().toHtmlEscaped()));
  tokens_->showNote(tr("<h3>Tokens</h3><p>%1 is an image classifier; the token view is for μMoE GPTs (e.g. the bundled "
                       "<code>gpt-fortunes.mumoe.safetensors</code>).</p>")
                        .arg(QFileInfo(currentPath_).fileName().toHtmlEscaped()));
  // The Bias, Tokens and Steering pages do not apply to a multi-class classifier; Compare does.
  const int page = tabs_->currentIndex();
  if (page >= int(Page::Bias) && page <= int(Page::Steering)) showPage(Page::Experts);
  const auto& layers = overview_->summary().layers;
  // A model with several μMoE layers: the one selected on the Model page.
  QString layer;
  if (layers.size() > 1) {
    const QModelIndex current = table_->currentIndex();
    auto* proxy = static_cast<QSortFilterProxyModel*>(table_->model());
    const int row = current.isValid() ? proxy->mapToSource(current).row() : 0;
    layer = QString::fromStdString(layers[static_cast<size_t>(row)].name);
  }
  thumbnails_->clear();
  experts_->clear();
  experts_->setMessage(tr("<i>Opening %1 on %2…</i>").arg(QFileInfo(currentPath_).fileName().toHtmlEscaped(),
                                                          dataSpec().toHtmlEscaped()));
  ablationChart_->clear();
  sweepChart_->clear();
  accuracy_ = {};
  classNames_.clear();
  statusLabel_->setText(tr("Opening %1 on %2…").arg(currentPath_, dataSpec()));
  analysedLayer_ = layer;
  controller_->open(currentPath_, dataSpec(), layer);
  comparison_->setData(dataSpec(), controller_->cachePath());
}

void MainWindow::onSessionOpened(const SessionInfo& info) {
  QSettings().setValue(kDataKey, info.dataSpec);
  reportAction_->setEnabled(true);
  removalAction_->setEnabled(true);
  accuracy_ = info.accuracy;
  classNames_ = info.classNames;
  thumbnails_->setAvailable(info.hasImages);
  QStringList layers;
  for (const auto& l : overview_->summary().layers) layers << QString::fromStdString(l.name);
  experts_->setSession(info, layers);
  const int modes = static_cast<int>(info.expertDims.size());
  statusLabel_->setText(tr("%1 · layer %2 · %3 on %4 samples of %5 · accuracy %6 % · %7")
                            .arg(QFileInfo(info.modelPath).fileName(), info.layer)
                            .arg(modes == 1 ? tr("%1 experts").arg(info.expertDims.value(0))
                                            : tr("experts %1").arg(joinDims(std::vector<int64_t>(info.expertDims.begin(),
                                                                                                 info.expertDims.end()))))
                            .arg(info.samplesAvailable > info.samples
                                     ? tr("%1 (of %2: the rest would not fit in memory)")
                                           .arg(groupedNumber(info.samples), groupedNumber(info.samplesAvailable))
                                     : groupedNumber(info.samples))
                            .arg(info.dataSpec)
                            .arg(info.accuracy.overall * 100, 0, 'f', 2)
                            .arg(info.patchGrid > 0 ? tr("backbone layer analysed in %1 (not cached)").arg(durationText(info.openSeconds))
                                 : info.extractedNow ? tr("extracted in %1").arg(durationText(info.openSeconds))
                                                     : tr("from the cache")));
  if (!info.cacheNote.isEmpty()) showError(tr("Analysis cache"), info.cacheNote);
  controller_->requestStatistics(0, experts_->threshold());
  // An early ViT block's sweep re-runs the blocks after it for every expert's images (minutes):
  // it waits for Run Sweep.
  if (info.sweepIsCheap) controller_->requestSweep(0);
  else
    statusBar()->showMessage(tr("Backbone layer %1: Analysis ▸ Run Sweep (Ctrl+Shift+Return) ablates each expert in turn")
                                 .arg(info.layer),
                             15000);
  Q_EMIT sessionReady();
}

void MainWindow::showPage(Page page) { tabs_->setCurrentIndex(static_cast<int>(page)); }

void MainWindow::ablate(const QVector<qint64>& experts) {
  if (experts.isEmpty()) {
    statusBar()->showMessage(tr("Select one or more experts to ablate"), 5000);
    return;
  }
  if (!controller_->hasSession()) {
    statusBar()->showMessage(tr("The analysis is not ready yet"), 5000);
    return;
  }
  controller_->requestAblation(experts_->mode(), experts);
  showPage(Page::Ablation);
}

void MainWindow::runSweep() {
  if (kind_ != Kind::MultiClass) {  // the sweep charts per-class accuracy: multi-class models only
    statusBar()->showMessage(kind_ == Kind::Gpt ? tr("A GPT's experts are ablated one at a time on the Tokens page "
                                                    "(double-click an expert, or Ablate Selected Experts)")
                                                 : tr("The sweep is for multi-class models; this one is multi-label"),
                             8000);
    return;
  }
  controller_->requestSweep(experts_->mode());
  showPage(Page::Ablation);
}

bool MainWindow::exportCurrentView(const QString& path) {
  const auto& gallery = experts_->gallery()->model()->gallery();
  if (tabs_->currentIndex() == int(Page::Experts) && path.endsWith(QLatin1String(".png"), Qt::CaseInsensitive) &&
      !gallery.items.empty() && controller_->info().hasImages) {
    // A PNG of the gallery holds all of it (a contact sheet drawn by the core on the worker), not
    // only the rows on screen; an SVG is the visible part, as drawn.
    controller_->exportGallery(path, gallery);
    statusBar()->showMessage(tr("Writing the gallery's %1 images to %2…").arg(gallery.items.size()).arg(path));
    return true;
  }
  QWidget* widget = nullptr;
  switch (static_cast<Page>(tabs_->currentIndex())) {
    case Page::Model: widget = table_; break;
    case Page::Experts: widget = experts_->gallery()->listView()->viewport(); break;
    case Page::Bias: widget = bias_; break;
    case Page::Tokens: widget = tokens_; break;
    case Page::Steering: widget = steering_; break;
    case Page::Compare: widget = comparison_->chartView(); break;
    case Page::Ablation:  // the chart with its summary line (accuracy before → after, what changed)
      widget = ablationChart_->hasOutcome() || !sweepChart_->hasSweep() ? static_cast<QWidget*>(ablationChart_)
                                                                        : static_cast<QWidget*>(sweepChart_);
      break;
  }
  QString error;
  if (!exportWidget(widget, path, &error)) {
    showError(tr("Export failed"), error);
    return false;
  }
  statusBar()->showMessage(tr("Saved %1").arg(path), 6000);
  return true;
}

void MainWindow::chooseExport() {
  QSettings settings;
  const QString dir = settings.value(QStringLiteral("exportDir"), QDir::homePath()).toString();
  const QString name = tabs_->currentIndex() == int(Page::Experts)
                           ? QStringLiteral("gallery-expert-%1.png").arg(experts_->currentExpert())
                           : QStringLiteral("ablation.png");
  const QString path = QFileDialog::getSaveFileName(this, tr("Export View"), dir + QLatin1Char('/') + name, exportFileFilter());
  if (path.isEmpty()) return;
  settings.setValue(QStringLiteral("exportDir"), QFileInfo(path).absolutePath());
  exportCurrentView(path);
}

void MainWindow::chooseExportReport() {
  if (!controller_->hasSession()) return;
  QSettings settings;
  const QString dir = settings.value(QStringLiteral("exportDir"), QDir::homePath()).toString();
  const QString name = QFileInfo(currentPath_).completeBaseName() + QStringLiteral("-report.html");
  const QString path = QFileDialog::getSaveFileName(this, tr("Export Report"), dir + QLatin1Char('/') + name,
                                                    tr("HTML files (*.html)"));
  if (path.isEmpty()) return;
  settings.setValue(QStringLiteral("exportDir"), QFileInfo(path).absolutePath());
  controller_->exportReport(path);
}

void MainWindow::chooseExportWithoutExperts() {
  const auto experts = experts_->selectedExperts();
  if (!controller_->hasSession() || experts.isEmpty()) {
    statusBar()->showMessage(tr("Select the experts to remove on the Experts page first"), 5000);
    return;
  }
  QSettings settings;
  const QString dir = settings.value(QStringLiteral("exportDir"), QDir::homePath()).toString();
  const QFileInfo model(currentPath_);
  const QString name = model.completeBaseName() + QStringLiteral("-without-experts.") + model.suffix();
  const QString path = QFileDialog::getSaveFileName(this, tr("Export Model Without Selected Experts"),
                                                    dir + QLatin1Char('/') + name,
                                                    tr("Model files (*.safetensors *.pth *.pt)"));
  if (path.isEmpty()) return;
  settings.setValue(QStringLiteral("exportDir"), QFileInfo(path).absolutePath());
  controller_->exportWithoutExperts(path, experts);
}

void MainWindow::chooseAndOpenModel() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Open Model"), QFileInfo(currentPath_).absolutePath(),
                                                    tr("Model files (*.safetensors *.pth *.pt);;All files (*)"));
  if (!path.isEmpty()) openModel(path);
}

void MainWindow::chooseDataFolder() {
  const QString dir = QFileDialog::getExistingDirectory(this, tr("Image Folder (one sub-folder per class)"));
  if (!dir.isEmpty()) setDataSpec(QStringLiteral("folder:") + dir);
}

void MainWindow::chooseFeatureFile() {
  const QString file = QFileDialog::getOpenFileName(this, tr("Feature File"), {}, tr("Feature files (*.safetensors)"));
  if (!file.isEmpty()) setDataSpec(QStringLiteral("features:") + file);
}

void MainWindow::showLayerDetails() {
  const auto& summary = overview_->summary();
  const QModelIndex current = table_->currentIndex();
  if (summary.layers.empty()) {
    details_->clear();
    return;
  }
  auto* proxy = static_cast<QSortFilterProxyModel*>(table_->model());
  const int row = current.isValid() ? proxy->mapToSource(current).row() : 0;
  details_->setHtml(layerDetailsHtml(summary, static_cast<size_t>(row)));
}

void MainWindow::rememberRecent(const QString& path) {
  QSettings settings;
  QStringList recent = settings.value(kRecentKey).toStringList();
  recent.removeAll(path);
  recent.prepend(path);
  while (recent.size() > kMaxRecentFiles) recent.removeLast();
  settings.setValue(kRecentKey, recent);
  rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu() {
  recentMenu_->clear();
  const QStringList recent = QSettings().value(kRecentKey).toStringList();
  int n = 0;
  for (const QString& path : recent) {
    auto* action = recentMenu_->addAction(QStringLiteral("&%1 %2").arg(++n).arg(QFileInfo(path).fileName()), this,
                                          [this, path] { openModel(path); });
    action->setToolTip(path);
    if (n <= 9) action->setShortcut(QKeySequence(QStringLiteral("Ctrl+Alt+%1").arg(n)));
  }
  recentMenu_->setEnabled(!recent.isEmpty());
}

void MainWindow::showError(const QString& title, const QString& message) {
  statusBar()->showMessage(message, 10000);
  if (errorDialogs_) QMessageBox::critical(this, title, message);
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
  if (event->mimeData()->hasUrls()) event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event) {
  const auto urls = event->mimeData()->urls();
  if (urls.isEmpty() || !urls.first().isLocalFile()) return;
  const QFileInfo dropped(urls.first().toLocalFile());
  // A folder is an image data set (one sub-folder per class); a file is a model.
  if (dropped.isDir()) setDataSpec(QStringLiteral("folder:") + dropped.absoluteFilePath());
  else openModel(dropped.absoluteFilePath());
}

void MainWindow::saveLayout() const {
  QSettings settings;
  settings.setValue("mainWindow/geometry", saveGeometry());
  settings.setValue("mainWindow/state", saveState());
  settings.setValue("mainWindow/modelSplitter", modelSplitter_->saveState());
  settings.setValue("mainWindow/expertsSplitter", experts_->splitter()->saveState());
  settings.setValue("mainWindow/ablationSplitter", ablationSplitter_->saveState());
  settings.setValue("mainWindow/page", tabs_->currentIndex());
  settings.setValue("experts/hideDead", experts_->hideDeadBox()->isChecked());
}

void MainWindow::restoreLayout() {
  QSettings settings;
  restoreGeometry(settings.value("mainWindow/geometry").toByteArray());
  if (!settings.contains("mainWindow/geometry")) resize(1280, 800);
  restoreState(settings.value("mainWindow/state").toByteArray());
  modelSplitter_->restoreState(settings.value("mainWindow/modelSplitter").toByteArray());
  if (!experts_->splitter()->restoreState(settings.value("mainWindow/expertsSplitter").toByteArray()))
    experts_->splitter()->setSizes({520, 760});
  if (!ablationSplitter_->restoreState(settings.value("mainWindow/ablationSplitter").toByteArray()))
    ablationSplitter_->setSizes({380, 320});
  tabs_->setCurrentIndex(settings.value("mainWindow/page", int(Page::Experts)).toInt());
  experts_->hideDeadBox()->setChecked(settings.value("experts/hideDead", false).toBool());
}

void MainWindow::closeEvent(QCloseEvent* event) {
  saveLayout();
  monitor_->cancelAll();
  QMainWindow::closeEvent(event);
}

}  // namespace mumoe::ui
