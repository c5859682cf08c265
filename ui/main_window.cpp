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

#include "controls.h"
#include "result_dialog.h"
#include "ablation_chart.h"
#include "bias_page.h"
#include "editing/bias_session.h"
#include "gallery_model.h"
#include "model/manifest.h"
#include "model_comparison_page.h"
#include "steering_page.h"
#include "text_session_host.h"
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
  modelSplitter_ = makeSplitter(Qt::Vertical, QStringLiteral("modelSplitter"), table_, details_, 1, 2);

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
  // The Tokens and Steering pages share one session of the open GPT and one queue.
  textSessions_ = new TextSessionHost(this);
  tokens_ = new TokenPage(textSessions_);
  tabs_->addTab(bias_, tr("Bias"));
  tabs_->addTab(tokens_, tr("Tokens"));
  steering_ = new SteeringPage(textSessions_);
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
  monitor_->track(textSessions_->worker());  // the Tokens and Steering pages' jobs
  monitor_->track(comparison_->worker());
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
  connect(bias_, &BiasPage::reportExported, this, [this](const QString& path, qint64 bytes) {
    statusBar()->showMessage(tr("Saved the report %1 (the bias table, %2 KiB)").arg(path).arg(bytes / 1024), 8000);
  });
  connect(bias_, &BiasPage::opened, this, [this] {
    reportAction_->setEnabled(true);  // a multi-label model's report is its bias table
    rememberDataSpec(dataSpec());  // it opened: the next start's default, and in the box's list
    statusLabel_->setText(tr("%1 · bias correction ready").arg(QFileInfo(currentPath_).fileName()));
  });
  connect(tokens_, &TokenPage::opened, this, [this] {
    if (kind_ == Kind::Gpt) {
      dataCombo_->setCurrentText(tokens_->dataIdentity());  // what the page reads (greyed)
      dataCombo_->lineEdit()->setCursorPosition(0);          // a long identity shows its start: the text's name
    }
    statusLabel_->setText(tr("%1 · token view ready").arg(QFileInfo(currentPath_).fileName()));
    reportAction_->setEnabled(true);  // a GPT's report is its open block's
  });
  connect(tokens_, &TokenPage::reportExported, this, &MainWindow::showReportSaved);
  restoreLayout();
  comparison_->setData(dataSpec(), controller_->cachePath());
}

void MainWindow::showReportSaved(const QString& path, int sections, qint64 bytes) {
  statusBar()->showMessage(
      tr("Saved the report %1 (%2 experts in detail, %3 KiB)").arg(path).arg(sections).arg(bytes / 1024), 8000);
}

MainWindow::~MainWindow() {
  // The pages finish their queues' jobs in their destructors, inside ~QWidget, when this window
  // is half destroyed: no answer, failure or busy signal may reach it from then on.
  monitor_->detachAll();
  disconnect(monitor_, nullptr, this, nullptr);
  disconnect(controller_, nullptr, this, nullptr);
  // The shared text session's jobs end here, while the pages still stand: the host is a child made
  // before the tabs were reparented, so it is deleted before the pages, whose destructors then
  // find it gone (QPointer) and have nothing left to cancel.
  textSessions_->shutdown();
}

void MainWindow::connectController() {
  auto* c = controller_;
  connect(c, &SessionController::sessionOpened, this, &MainWindow::onSessionOpened);
  connect(c, &SessionController::statisticsReady, this,
          [this](const analysis::ModeStatistics& s, const AnswerTiming&) { experts_->setStatistics(s); });
  connect(c, &SessionController::sweepReady, this, [this](const analysis::SweepOutcome& s, const AnswerTiming& t) {
    experts_->setSweep(s, accuracy_);
    sweepChart_->setSweep(s, accuracy_);
    // Run Sweep answered from the cache changes nothing on screen otherwise: say where it came from.
    const QString took = t.latencyMs < 10'000 ? tr("%1 ms").arg(t.latencyMs, 0, 'f', t.fromCache ? 1 : 0)
                                               : tr("%1 s").arg(t.latencyMs / 1000, 0, 'f', 1);
    statusBar()->showMessage((t.fromCache ? tr("Sweep of %1 experts from the cache in %2") : tr("Sweep of %1 experts computed in %2"))
                                 .arg(s.experts.size())
                                 .arg(took),
                             8000);
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
  connect(c, &SessionController::reportExported, this, &MainWindow::showReportSaved);
  connect(c, &SessionController::modelExported, this, [this](const QString& path, const QString& summary) {
    statusBar()->showMessage(tr("Saved %1 (%2)").arg(path, summary), 12000);
  });
  connect(thumbnails_, &ThumbnailStore::imagesWanted, c, &SessionController::requestImages);
  connect(c, &SessionController::openFailed, this, [this](const QString& message) {
    experts_->setMessage(tr("<b style='color:#c62828'>Analysis unavailable:</b> %1").arg(message.toHtmlEscaped()));
    if (kind_ == Kind::MultiLabel) {
      // Its Bias page is the model's own workflow and may well work (a multi-label router head's
      // experts are not analysed): the Experts page says why, without an error dialog.
      statusBar()->showMessage(tr("Experts page unavailable — %1").arg(message), 10000);
      return;
    }
    statusLabel_->setText(tr("Analysis unavailable — %1").arg(message));
    lastError_ = message;
    Q_EMIT analysisFailed(message);
    showError(tr("Cannot analyse this model"), message);
  });
  connect(c, &SessionController::openCancelled, this, [this] {
    // Replace "Opening …", which would otherwise stay.
    experts_->setMessage(model::backbone_layer_step(analysedLayer_.toStdString())
                             ? tr("<i>Analysis cancelled. Press Analyze (F5) to start it again (a backbone layer's "
                                  "baseline pass is not cached: it starts from the first image).</i>")
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
  openingModel_ = true;  // showPagesForKind: the model's own first page
  startAnalysis();
  openingModel_ = false;
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

void MainWindow::setCachePath(const QString& path) {
  controller_->setCachePath(path);
  comparison_->setData(chosenDataSpec(), controller_->cachePath());
}

void MainWindow::setErrorDialogsEnabled(bool enabled) {
  errorDialogs_ = enabled;
  bias_->setErrorDialogsEnabled(enabled);
  tokens_->setErrorDialogsEnabled(enabled);
}

void MainWindow::pageFailedToOpen(const QString& message) {
  statusLabel_->setText(tr("Unavailable — %1").arg(message));
  lastError_ = message;
  Q_EMIT analysisFailed(message);
}

void MainWindow::startBias() {
  const QString test = multilabelTestSpec();
  QString train = biasTrainSpec_;
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
  if (!showPagesForKind()) return;  // a multi-label model or a GPT: its own pages
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
  rememberDataSpec(info.dataSpec);
  reportAction_->setEnabled(true);
  removalAction_->setEnabled(true);
  accuracy_ = info.accuracy;
  classNames_ = info.classNames;
  ablationChart_->setPerOutput(info.multilabel);
  sweepChart_->setPerOutput(info.multilabel);
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
                            .arg(info.patchGrid > 0 ? tr("backbone layer analysed in %1 (its sweeps are cached)").arg(durationText(info.openSeconds))
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

void MainWindow::runSweep() {
  if (kind_ == Kind::Gpt) {  // the sweep charts accuracy per class (per output): image models
    statusBar()->showMessage(tr("A GPT's experts are ablated one at a time on the Tokens page "
                                "(double-click an expert, or Ablate Selected Experts)"),
                             8000);
    return;
  }
  controller_->requestSweep(experts_->mode());
  showPage(Page::Ablation);
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

void MainWindow::showError(const QString& title, const QString& message) {
  statusBar()->showMessage(message, 10000);
  if (errorDialogs_) showResultDialog(this, QMessageBox::Critical, title, message);
}

}  // namespace mumoe::ui
