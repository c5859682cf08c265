#include "bias_page.h"

#include <QAction>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QListWidget>
#include <QMessageBox>
#include <QPushButton>
#include <QSlider>
#include <QSplitter>
#include <QToolButton>
#include <QVBoxLayout>

#include <cmath>

#include "controls.h"
#include "result_dialog.h"
#include "bias_controller.h"
#include "bias_export_dialog.h"
#include "bias_results_view.h"
#include "note_stack.h"
#include "worker_queue.h"

namespace mumoe::ui {

BiasPage::BiasPage(QWidget* parent) : QWidget(parent), controller_(new BiasController(this)) {
  // Undo / Redo of the core's edit stack: the page's buttons and the main window's Edit menu
  // (which gives them Ctrl+Z / Ctrl+Shift+Z from every page) share these two actions.
  undoAction_ = new QAction(tr("Undo"), this);
  redoAction_ = new QAction(tr("Redo"), this);
  connect(undoAction_, &QAction::triggered, this, &BiasPage::undoEdit);
  connect(redoAction_, &QAction::triggered, this, &BiasPage::redoEdit);

  results_ = new BiasResultsView;
  results_->setContentsMargins(6, 0, 0, 0);
  auto* split = makeSplitter(Qt::Horizontal, QString(), buildControls(), results_, 0, 1);
  split->setSizes({380, 900});
  header_ = new QLabel;
  header_->setTextFormat(Qt::RichText);
  header_->setWordWrap(true);
  pages_ = NoteStack::fillPage(this, header_, split);
  connectController();
  showStack();
  showNote(tr("<h3>Bias correction</h3><p>Open a <b>multi-label</b> model (one binary output per attribute, e.g. "
              "the bundled <code>biased-fmnist.mumoe.safetensors</code>) to correct the bias of one of its outputs "
              "against a subpopulation with an expert-conditional logit rewrite.</p>"));
}

BiasPage::~BiasPage() = default;  // the controller cancels and waits for its worker

WorkerQueue* BiasPage::worker() const { return controller_->worker(); }
bool BiasPage::hasSession() const { return controller_->hasSession(); }
const editing::EditStack& BiasPage::coreStack() const { return controller_->stack(); }

void BiasPage::connectController() {
  auto* c = controller_;
  // Each job shows its own failure below; the signal is for observers.
  connect(c->worker(), &WorkerQueue::failed, this, &BiasPage::failed);
  connect(c, &BiasController::opened, this, &BiasPage::onOpened);
  connect(c, &BiasController::openFailed, this, [this](const QString& message) {
    pages_->showNote(tr("<h3>Bias correction</h3><p style='color:#b02a2a'>%1</p>").arg(message.toHtmlEscaped()));
    Q_EMIT openFailed(message);
  });
  connect(c, &BiasController::openCancelled, this, [this] {
    pages_->showNote(tr("<h3>Bias correction</h3><p>Cancelled. Open the model again (F5) to compute the study.</p>"));
  });
  connect(c, &BiasController::evaluated, this, &BiasPage::onEvaluated);
  connect(c, &BiasController::evaluationFailed, this, [this](const QString& message) {
    editText_->setText(tr("<span style='color:#b02a2a'>%1</span>").arg(message.toHtmlEscaped()));
    applyButton_->setEnabled(false);
  });
  connect(c, &BiasController::comparisonReady, this, [this](const QString& name, const editing::VariantMetrics& metrics) {
    comparisons_[name] = metrics;
    showEvaluation();
    Q_EMIT comparisonReady(name);
  });
  connect(c, &BiasController::comparisonFailed, this, &BiasPage::showErrorDialog);
  connect(c, &BiasController::stackShown, this, &BiasPage::showStack);
  connect(c, &BiasController::stackChanged, this, [this] {
    clearComparisons();
    // λ was the applied edit's: kept, "After" would silently preview the same edit stacked twice.
    // Propose afresh for the edited model instead — unless the user set λ after asking for this
    // change (a burst of apply/undo/redo answers must not overwrite the λ typed meanwhile).
    if (lambdaSetAt_ < stackAskedAt_) lambda_.reset();
    requestEvaluation();  // "before" is the model with the applied edits
    Q_EMIT stackChanged();
  });
  connect(c, &BiasController::stackChangeFailed, this, &BiasPage::showErrorDialog);
  connect(c, &BiasController::exported, this, [this](const editing::ExportReport& report) {
    const QString text = tr("Wrote %1 (%2 layout, %3 edit(s) folded). Reloaded and compared on %4 test samples: "
                            "max |difference| = %5 (%6 s).")
                             .arg(QString::fromStdString(report.output), QString::fromStdString(editing::to_string(report.layout)))
                             .arg(report.edits)
                             .arg(report.verified_samples)
                             .arg(report.max_abs_difference, 0, 'g', 3)
                             .arg(report.seconds, 0, 'f', 1);
    exportResult_->setText(QStringLiteral("<span style='color:#1b7f3b'>✔</span> ") + text.toHtmlEscaped());
    Q_EMIT exportFinished(true, text);
    if (errorDialogs_) showResultDialog(this, QMessageBox::Information, tr("Export verified"), text);
  });
  connect(c, &BiasController::exportFailed, this, [this](const QString& message) {
    exportResult_->setText(tr("<span style='color:#b02a2a'>Export failed: %1</span>").arg(message.toHtmlEscaped()));
    Q_EMIT exportFinished(false, message);
  });
  connect(c, &BiasController::reportExported, this, &BiasPage::reportExported);
  connect(c, &BiasController::reportFailed, this, [this](const QString& message) {
    showErrorDialog(message);
    Q_EMIT failed(tr("Writing the report"), message);
  });
  connect(c, &BiasController::exportCancelled, this, [this] {
    exportResult_->setText(tr("Export cancelled; nothing was written."));
    Q_EMIT exportFinished(false, tr("cancelled"));
  });
}

QWidget* BiasPage::buildControls() {
  auto* box = new QWidget;
  auto* v = new QVBoxLayout(box);
  v->setContentsMargins(0, 0, 6, 0);

  auto* taskBox = new QGroupBox(tr("Task"));
  auto* form = new QFormLayout(taskBox);
  target_ = new QComboBox;
  target_->setToolTip(tr("The output (a label of the multi-label model) whose logit is rewritten"));
  sensitive_ = new QComboBox;
  sensitive_->setToolTip(tr("The sensitive attribute: metrics are measured over target × sensitive"));
  cell_ = new QComboBox;
  cell_->setEditable(true);
  cell_->setInsertPolicy(QComboBox::NoInsert);
  cell_->setToolTip(tr("The subpopulation whose training samples define ā: one of the four cells, or a predicate "
                       "such as long_sleeves=1&frame=1 (press Enter)"));
  form->addRow(tr("Target output"), target_);
  form->addRow(tr("Sensitive attribute"), sensitive_);
  form->addRow(tr("Subpopulation"), cell_);
  v->addWidget(taskBox);

  auto* editBox = new QGroupBox(tr("Edit  y ← y + λ āᵀa"));
  auto* ev = new QVBoxLayout(editBox);
  auto* row = new QHBoxLayout;
  row->addWidget(new QLabel(tr("λ")));
  slider_ = new QSlider(Qt::Horizontal);
  slider_->setRange(-200, 200);
  slider_->setTickPosition(QSlider::TicksBelow);
  slider_->setTickInterval(50);
  slider_->setToolTip(tr("λ from −2N to 2N (N = experts); the metrics follow live"));
  row->addWidget(slider_, 1);
  lambdaSpin_ = new QDoubleSpinBox;
  lambdaSpin_->setDecimals(2);
  lambdaSpin_->setKeyboardTracking(false);
  lambdaSpin_->setMinimumWidth(90);
  row->addWidget(lambdaSpin_);
  ev->addLayout(row);
  lambdaNote_ = new QLabel;
  lambdaNote_->setWordWrap(true);
  ev->addWidget(lambdaNote_);
  editText_ = new QLabel;
  editText_->setTextFormat(Qt::RichText);
  editText_->setWordWrap(true);
  editText_->setStyleSheet(QStringLiteral("color:#555"));
  ev->addWidget(editText_);
  auto* buttons = new QHBoxLayout;
  proposeButton_ = new QPushButton(tr("Proposed λ"));
  proposeButton_->setToolTip(tr("Back to λ = N, signed toward the label the subpopulation is under-predicted for"));
  blindButton_ = new QPushButton(tr("Blind threshold"));
  blindButton_->setToolTip(tr("Compare with the blind-threshold baseline (ā = 1, |λ| = 2.5)"));
  oversampleButton_ = new QPushButton(tr("Oversample"));
  oversampleButton_->setToolTip(tr("Compare with retraining the layer with the subpopulation oversampled (seconds)"));
  buttons->addWidget(proposeButton_);
  buttons->addWidget(blindButton_);
  buttons->addWidget(oversampleButton_);
  ev->addLayout(buttons);
  applyButton_ = new QPushButton(tr("Apply Edit"));
  applyButton_->setDefault(true);
  applyButton_->setToolTip(tr("Add this edit to the model's edits (undo: Ctrl+Z); saved at once"));
  ev->addWidget(applyButton_);
  v->addWidget(editBox);

  auto* editsBox = new QGroupBox(tr("Applied edits"));
  auto* lv = new QVBoxLayout(editsBox);
  edits_ = new QListWidget;
  edits_->setWordWrap(true);
  edits_->setAlternatingRowColors(true);
  edits_->setToolTip(tr("The model's edit stack, kept in the edit session database; undone edits are greyed"));
  lv->addWidget(edits_, 1);
  auto* eb = new QHBoxLayout;
  auto* undoButton = new QToolButton;
  undoButton->setDefaultAction(undoAction_);
  undoButton->setToolButtonStyle(Qt::ToolButtonTextOnly);
  auto* redoButton = new QToolButton;
  redoButton->setDefaultAction(redoAction_);
  redoButton->setToolButtonStyle(Qt::ToolButtonTextOnly);
  exportButton_ = new QPushButton(tr("Export…"));
  exportButton_->setToolTip(tr("Fold the applied edits into the weights and write a new, verified model file"));
  eb->addWidget(undoButton);
  eb->addWidget(redoButton);
  eb->addStretch(1);
  eb->addWidget(exportButton_);
  lv->addLayout(eb);
  exportResult_ = new QLabel;
  exportResult_->setWordWrap(true);
  exportResult_->setTextFormat(Qt::RichText);
  exportResult_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  lv->addWidget(exportResult_);
  v->addWidget(editsBox, 1);

  connect(target_, &QComboBox::currentTextChanged, this, [this] {
    fillSensitive();
    fillCells();
    taskChanged();
  });
  connect(sensitive_, &QComboBox::currentTextChanged, this, [this] {
    fillCells();
    taskChanged();
  });
  connect(cell_, &QComboBox::currentTextChanged, this, [this] { taskChanged(); });
  connect(slider_, &QSlider::valueChanged, this, &BiasPage::onSliderMoved);
  connect(lambdaSpin_, &QDoubleSpinBox::valueChanged, this, &BiasPage::onSpinChanged);
  connect(proposeButton_, &QPushButton::clicked, this, [this] { setLambda(proposed_); });
  connect(blindButton_, &QPushButton::clicked, this, &BiasPage::compareBlind);
  connect(oversampleButton_, &QPushButton::clicked, this, &BiasPage::compareOversample);
  connect(applyButton_, &QPushButton::clicked, this, &BiasPage::applyEdit);
  connect(exportButton_, &QPushButton::clicked, this, &BiasPage::chooseExport);
  box->setMinimumWidth(340);
  box->setMaximumWidth(460);
  return box;
}

void BiasPage::showNote(const QString& html) {
  controller_->close();  // releases the session and its arrays (the model open now is another kind)
  pages_->showNote(html);
}

void BiasPage::open(const QString& modelPath, const QString& testSpec, const QString& trainSpec,
                    const QString& sessionDb, const QString& cachePath) {
  modelPath_ = modelPath;
  testSpec_ = testSpec;
  evaluation_.reset();
  clearComparisons();
  pages_->showNote(tr("<h3>Bias correction</h3><p><i>Computing the μMoE layer's coefficients for every sample of %1 "
                      "and %2 (progress in the status bar; Esc cancels)…</i></p>")
                       .arg(trainSpec.toHtmlEscaped(), testSpec.toHtmlEscaped()));
  editing::BiasSessionOptions options;
  options.model_path = modelPath.toStdString();
  options.test_spec = testSpec.toStdString();
  options.train_spec = trainSpec.toStdString();
  options.session_db = sessionDb.toStdString();
  options.cache_path = cachePath.toStdString();
  controller_->open(options);
}

void BiasPage::onOpened(const BiasOpening& opening) {
  targets_ = opening.targets;
  attributes_ = opening.attributes;
  experts_ = opening.experts;
  const double n = experts_;
  lambdaSpin_->blockSignals(true);
  lambdaSpin_->setRange(-2 * n, 2 * n);
  lambdaSpin_->setSingleStep(std::max(0.01, n / 100));
  lambdaSpin_->blockSignals(false);
  header_->setText(tr("<b>%1</b> · %2 outputs · %3 experts · metrics on %4 · opened in %5 s")
                       .arg(QFileInfo(modelPath_).fileName().toHtmlEscaped())
                       .arg(targets_.size())
                       .arg(experts_)
                       .arg(testSpec_.toHtmlEscaped())
                       .arg(opening.seconds, 0, 'f', 1));
  const auto& initial = opening.initial;
  target_->blockSignals(true);
  sensitive_->blockSignals(true);
  cell_->blockSignals(true);
  target_->clear();
  target_->addItems(targets_);
  target_->setCurrentIndex(
      initial ? static_cast<int>(std::max<qsizetype>(0, targets_.indexOf(QString::fromStdString(initial->target)))) : 0);
  fillSensitive(initial ? QString::fromStdString(initial->sensitive) : QString());
  fillCells();
  if (initial) {
    const int cell = cell_->findText(QString::fromStdString(initial->subpopulation.text()));
    if (cell >= 0) cell_->setCurrentIndex(cell);
  }
  target_->blockSignals(false);
  sensitive_->blockSignals(false);
  cell_->blockSignals(false);
  pages_->showContent();
  Q_EMIT opened();
  taskChanged();
}

void BiasPage::fillSensitive(const QString& preferred) {
  const QString keep = preferred.isEmpty() ? sensitive_->currentText() : preferred;
  const QString target = target_->currentText();
  const bool block = sensitive_->blockSignals(true);
  sensitive_->clear();
  // Attributes that are not outputs first (frame for demo 2): the usual sensitive ones.
  QStringList first, rest;
  for (const auto& a : attributes_) {
    if (a == target) continue;
    (targets_.contains(a) ? rest : first) << a;
  }
  sensitive_->addItems(first + rest);
  const int i = sensitive_->findText(keep);
  sensitive_->setCurrentIndex(i >= 0 ? i : 0);
  sensitive_->blockSignals(block);
}

void BiasPage::fillCells() {
  const QString t = target_->currentText(), s = sensitive_->currentText();
  const bool block = cell_->blockSignals(true);
  cell_->clear();
  for (int tv : {1, 0})
    for (int sv : {1, 0}) cell_->addItem(QStringLiteral("%1=%2&%3=%4").arg(t).arg(tv).arg(s).arg(sv));
  cell_->setCurrentIndex(0);
  cell_->blockSignals(block);
}

void BiasPage::exportReport(const QString& path) {
  QString error;
  if (const auto task = currentTask(&error)) controller_->exportReport(path, *task, !comparisons_.isEmpty());
  else showErrorDialog(error);
}

std::optional<editing::BiasTask> BiasPage::currentTask(QString* error) const {
  try {
    return editing::make_bias_task(target_->currentText().toStdString(), cell_->currentText().toStdString(),
                                   sensitive_->currentText().toStdString());
  } catch (const std::exception& e) {
    if (error) *error = QString::fromUtf8(e.what());
    return std::nullopt;
  }
}

void BiasPage::taskChanged() {
  if (!hasSession()) return;
  lambda_.reset();  // propose for the new task
  clearComparisons();
  requestEvaluation();
}

void BiasPage::setLambda(double lambda) {
  lambdaSpin_->setValue(lambda);  // → onSpinChanged (only when it changed)
  if (!lambda_ || *lambda_ != lambdaSpin_->value()) onSpinChanged(lambdaSpin_->value());
}

void BiasPage::onSliderMoved(int value) {
  if (!hasSession()) return;
  const double lambda = value / 100.0 * experts_;
  const bool block = lambdaSpin_->blockSignals(true);
  lambdaSpin_->setValue(lambda);
  lambdaSpin_->blockSignals(block);
  lambda_ = lambdaSpin_->value();
  lambdaSetAt_ = ++actions_;
  requestEvaluation();
}

void BiasPage::onSpinChanged(double value) {
  if (!hasSession()) return;
  const bool block = slider_->blockSignals(true);
  slider_->setValue(static_cast<int>(std::lround(value / std::max(1, experts_) * 100)));
  slider_->blockSignals(block);
  lambda_ = value;
  lambdaSetAt_ = ++actions_;
  requestEvaluation();
}

void BiasPage::requestEvaluation() {
  QString error;
  const auto task = currentTask(&error);
  if (!task) {
    editText_->setText(tr("<span style='color:#b02a2a'>%1</span>").arg(error.toHtmlEscaped()));
    applyButton_->setEnabled(false);
    return;
  }
  controller_->evaluate(*task, lambda_);  // coalesced by the controller
}

void BiasPage::onEvaluated(const BiasEvaluation& evaluation, bool proposed) {
  proposed_ = evaluation.proposedLambda;
  // The proposal fills the slider only if the user has not set λ since (then their λ follows).
  if (proposed && !lambda_) {
    lambda_ = evaluation.edit.lambda;
    const bool b1 = lambdaSpin_->blockSignals(true), b2 = slider_->blockSignals(true);
    lambdaSpin_->setValue(evaluation.edit.lambda);
    slider_->setValue(static_cast<int>(std::lround(evaluation.edit.lambda / std::max(1, experts_) * 100)));
    lambdaSpin_->blockSignals(b1);
    slider_->blockSignals(b2);
  }
  evaluation_ = evaluation;
  showEvaluation();
  Q_EMIT evaluated();
}

void BiasPage::showEvaluation() {
  if (!evaluation_) return;
  const auto& e = *evaluation_;
  applyButton_->setEnabled(true);
  lambdaNote_->setText(tr("Proposed λ = %1 (N = %2, signed toward the under-predicted label)")
                           .arg(proposed_, 0, 'f', 2)
                           .arg(experts_));
  editText_->setText(tr("%1 · ā from %2 training samples").arg(QString::fromStdString(e.edit.describe()).toHtmlEscaped())
                         .arg(e.edit.support));
  results_->show(e, comparisons_);
}

void BiasPage::compareBlind() {
  if (const auto task = currentTask(); task && hasSession()) controller_->compareBlind(*task);
}

void BiasPage::compareOversample() {
  if (const auto task = currentTask(); task && hasSession()) controller_->compareOversample(*task);
}

void BiasPage::clearComparisons() {
  comparisons_.clear();
  controller_->dropComparisons();  // baselines still being computed belong to what was shown before
}

void BiasPage::exportModel(const editing::ExportRequest& request) {
  if (hasSession())
    exportResult_->setText(tr("<i>Exporting to %1…</i>").arg(QString::fromStdString(request.output).toHtmlEscaped()));
  controller_->exportModel(request);
}

void BiasPage::chooseExport() {
  if (!hasSession()) return;
  if (const auto request = askBiasExport(this, modelPath_, controller_->stack().applied_count())) exportModel(*request);
}

void BiasPage::showErrorDialog(const QString& message) {
  if (errorDialogs_) showResultDialog(this, QMessageBox::Warning, tr("Bias correction"), message);
}

}  // namespace mumoe::ui
