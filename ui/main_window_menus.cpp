// MainWindow's menus, tool bar and status bar, and what they lead to that is not the analysis
// flow itself: the file and folder choosers, the export dialogs and the recent-files menu
// (main_window.cpp opens models and runs analyses; main_window_views.cpp routes pages by model kind
// and keeps the layout).
#include <QAction>
#include <QAbstractButton>
#include <QCheckBox>
#include <QApplication>
#include <QComboBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QInputDialog>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QSettings>
#include <QStatusBar>
#include <QStyle>
#include <QTabWidget>
#include <QToolBar>

#include "ablation_chart.h"
#include "bias_page.h"
#include "experts_page.h"
#include "gallery_view.h"
#include "job_monitor.h"
#include "job_progress_widget.h"
#include "main_window.h"
#include "model_comparison_page.h"
#include "session_controller.h"
#include "token_page.h"
#include "widget_export.h"

namespace mumoe::ui {
namespace {

constexpr int kMaxRecentFiles = 8;
const char* kRecentKey = "recentFiles";

}  // namespace

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
                                    boxForced_ = false;  // not the SPEC another model kind hid
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
  // Short words on the toolbar (the menus keep the full names): at 1024 px the whole bar, Export
  // included, stays visible instead of folding into its » menu.
  ablateAction_->setIconText(tr("Ablate"));
  sweepAction_->setIconText(tr("Run Sweep"));
  cancelAction_->setIconText(tr("Cancel"));
  exportAction_->setIconText(tr("Export View"));
  openAction_->setIconText(tr("Open"));
  bar->addAction(openAction_);
  bar->addSeparator();
  bar->addWidget(new QLabel(tr(" Data ")));
  dataCombo_ = new QComboBox;
  dataCombo_->setEditable(true);
  dataCombo_->setMinimumContentsLength(22);
  dataCombo_->setInsertPolicy(QComboBox::NoInsert);
  dataCombo_->addItems({QStringLiteral("fashion-mnist:test"), QStringLiteral("fashion-mnist:train"),
                        QStringLiteral("biased-fmnist:test")});
  for (const QString& spec : QSettings().value(kRecentDataKey).toStringList())  // folder:, celeba: … used before
    if (dataCombo_->findText(spec) < 0) dataCombo_->addItem(spec);
  dataCombo_->setObjectName(QStringLiteral("dataSpec"));
  dataCombo_->setToolTip(tr("Data SPEC: fashion-mnist:test, idx:DIR:test, folder:DIR, celeba:DIR:test, features:FILE"));
  dataCombo_->setCurrentText(QSettings().value(kDataSettingsKey, QStringLiteral("fashion-mnist:test")).toString());
  // An editable combo also "activates" the listed item its text matches when its line edit loses
  // focus — a click on a page tab reopened the model and dropped the ablation just asked for. Only
  // a SPEC other than the one the pages read opens anything (F5 re-analyses the same one).
  const auto chosen = [this] {
    if (dataCombo_->currentText().trimmed() != appliedDataSpec_) setDataSpec(dataCombo_->currentText());
  };
  connect(dataCombo_, &QComboBox::activated, this, chosen);
  connect(dataCombo_->lineEdit(), &QLineEdit::returnPressed, this, chosen);
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
  // A GPT's session is the Tokens page's, a multi-label model's the Bias page's.
  const bool gpt = kind_ == Kind::Gpt, multilabel = kind_ == Kind::MultiLabel;
  if (gpt ? !tokens_->hasSession() : multilabel ? !bias_->hasSession() : !controller_->hasSession()) return;
  QSettings settings;
  const QString dir = settings.value(QStringLiteral("exportDir"), QDir::homePath()).toString();
  const QString name = QFileInfo(currentPath_).completeBaseName() + QStringLiteral("-report.html");
  const QString path = QFileDialog::getSaveFileName(this, tr("Export Report"), dir + QLatin1Char('/') + name,
                                                    tr("HTML files (*.html)"));
  if (path.isEmpty()) return;
  settings.setValue(QStringLiteral("exportDir"), QFileInfo(path).absolutePath());
  if (gpt) tokens_->exportReport(path);
  else if (multilabel) bias_->exportReport(path);
  else controller_->exportReport(path);
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

}  // namespace mumoe::ui
