// MainWindow's pages as a whole: which of them serve the open model's kind (a multi-class
// classifier, a multi-label model, a GPT) and what the others say, exporting the current view,
// drag and drop, and the window's layout kept between runs.
#include <QChartView>
#include <QCloseEvent>
#include <QLabel>
#include <QComboBox>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileInfo>
#include <QListView>
#include <QMimeData>
#include <QSettings>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QCheckBox>
#include <QAction>

#include "ablation_chart.h"
#include "bias_page.h"
#include "experts_page.h"
#include "gallery_model.h"
#include "gallery_view.h"
#include "job_monitor.h"
#include "main_window.h"
#include "model_comparison_page.h"
#include "model_overview_model.h"
#include "session_controller.h"
#include "steering_page.h"
#include "sweep_chart.h"
#include "thumbnail_store.h"
#include "token_page.h"
#include "widget_export.h"

namespace mumoe::ui {

// Every page set up for the open model's kind (the routing by kind lives here, not in the
// analysis flow): pages that do not serve it say so. A multi-label model opens its Bias page and
// its Experts/Ablation session on the same test data (the data box shows it); a GPT its Tokens
// page (and Steering). True when the caller then opens the Experts/Ablation session.
bool MainWindow::showPagesForKind() {
  // A GPT's pages read the validation split of the text it was trained on, not the image data
  // named here: the box is greyed rather than shown as if it applied.
  dataCombo_->setEnabled(kind_ != Kind::Gpt);
  showDataOfKind();
  steering_->setEnabled(kind_ == Kind::Gpt);  // steering is for language models only
  sweepAction_->setEnabled(kind_ != Kind::Gpt);
  const QString name = QFileInfo(currentPath_).fileName().toHtmlEscaped();
  if (kind_ == Kind::Gpt) {
    // The expert analysis of the Experts/Ablation pages is for image models: the previous
    // classifier's session must not answer Run Sweep or Ablate for this model.
    controller_->close();
    thumbnails_->clear();
    experts_->clear();
    ablationChart_->clear();
    sweepChart_->clear();
    experts_->setMessage(tr("<i>%1 is a μMoE GPT: its experts are on the <b>Tokens</b> page (Alt+5).</i>").arg(name));
    bias_->showNote(tr("<h3>Bias correction</h3><p>%1 is a language model; bias correction works on multi-label "
                       "classifiers.</p>").arg(name));
    const auto& layers = overview_->summary().layers;
    QStringList names;
    for (const auto& l : layers) names << QString::fromStdString(l.name);
    statusLabel_->setText(tr("Opening %1 (μMoE GPT) on its validation split…").arg(currentPath_));
    // The Steering page first: its header read then does not wait behind the Tokens page's
    // extraction on the queue the two share.
    steering_->setEnabled(true);
    steering_->setCachePath(controller_->cachePath());
    steering_->setModel(currentPath_, QString());
    tokens_->open(currentPath_, names, controller_->cachePath());
    showPage(Page::Tokens);
    return false;
  }
  const int page = tabs_->currentIndex();
  if (kind_ == Kind::MultiLabel) {
    tokens_->showNote(tr("<h3>Tokens</h3><p>%1 is not a language model.</p>").arg(name));
    startBias();
    // A model just opened shows its bias correction first; new data keeps the page the user is on
    // (its Experts and Ablation pages serve it too).
    if (openingModel_ || page == int(Page::Tokens) || page == int(Page::Steering)) showPage(Page::Bias);
    return true;
  }
  bias_->showNote(tr("<h3>Bias correction</h3><p>%1 is a <b>multi-class</b> classifier (one softmax over its classes). "
                     "Bias correction rewrites one binary output of a <b>multi-label</b> model against a subpopulation "
                     "(target × sensitive attribute), e.g. the bundled <code>biased-fmnist.mumoe.safetensors</code> "
                     "(demo 2): open it to use this page.</p>")
                      .arg(name));
  tokens_->showNote(tr("<h3>Tokens</h3><p>%1 is an image classifier; the token view is for μMoE GPTs (e.g. the bundled "
                       "<code>gpt-fortunes.mumoe.safetensors</code>).</p>")
                        .arg(name));
  // The Bias, Tokens and Steering pages do not apply to a multi-class classifier; Compare does.
  if (page >= int(Page::Bias) && page <= int(Page::Steering)) showPage(Page::Experts);
  return true;
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
  // Below this the toolbar folds into its » menu and the Experts page's table and gallery get too
  // narrow to read; 1024 × 640 (a small laptop) still shows every page whole.
  setMinimumSize(960, 600);
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
