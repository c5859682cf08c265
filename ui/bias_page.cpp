#include "bias_page.h"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QElapsedTimer>
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
#include <QStackedWidget>
#include <QToolButton>
#include <QAction>
#include <QVBoxLayout>

#include <cmath>
#include <limits>

#include "bias_export_dialog.h"
#include "bias_results_view.h"
#include "io/errors.h"
#include "worker_queue.h"

namespace mumoe::ui {

struct BiasPage::Slot {
  std::unique_ptr<editing::BiasSession> session;
  editing::BiasSession& get() {
    if (!session) throw UsageError("no bias session is open");
    return *session;
  }
};

namespace {

QStringList toQStringList(const std::vector<std::string>& v) {
  QStringList out;
  for (const auto& s : v) out << QString::fromStdString(s);
  return out;
}

}  // namespace

BiasPage::BiasPage(QWidget* parent) : QWidget(parent), slot_(std::make_shared<Slot>()) {
  worker_ = new WorkerQueue(this);
  // Undo / Redo of the core's edit stack: the page's buttons and the main window's Edit menu
  // (which gives them Ctrl+Z / Ctrl+Shift+Z from every page) share these two actions.
  undoAction_ = new QAction(tr("Undo"), this);
  redoAction_ = new QAction(tr("Redo"), this);
  connect(undoAction_, &QAction::triggered, this, &BiasPage::undoEdit);
  connect(redoAction_, &QAction::triggered, this, &BiasPage::redoEdit);
  updateEditActions();
  // Each job shows its own failure (WorkerQueue::Handlers); the signal is for observers.
  connect(worker_, &WorkerQueue::failed, this, &BiasPage::failed);

  note_ = new QLabel;
  note_->setWordWrap(true);
  note_->setTextFormat(Qt::RichText);
  note_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  note_->setMargin(24);
  note_->setTextInteractionFlags(Qt::TextSelectableByMouse);

  auto* content = new QWidget;
  auto* split = new QSplitter(Qt::Horizontal);
  split->addWidget(buildControls());
  results_ = new BiasResultsView;
  results_->setContentsMargins(6, 0, 0, 0);
  split->addWidget(results_);
  split->setStretchFactor(0, 0);
  split->setStretchFactor(1, 1);
  split->setSizes({380, 900});
  header_ = new QLabel;
  header_->setTextFormat(Qt::RichText);
  header_->setWordWrap(true);
  auto* contentLayout = new QVBoxLayout(content);
  contentLayout->setContentsMargins(6, 6, 6, 6);
  contentLayout->addWidget(header_);
  contentLayout->addWidget(split, 1);

  stackWidget_ = new QStackedWidget;
  stackWidget_->addWidget(note_);
  stackWidget_->addWidget(content);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(stackWidget_);
  showNote(tr("<h3>Bias correction</h3><p>Open a <b>multi-label</b> model (one binary output per attribute, e.g. "
              "the bundled <code>biased-fmnist.mumoe.safetensors</code>) to correct the bias of one of its outputs "
              "against a subpopulation with an expert-conditional logit rewrite.</p>"));
}

BiasPage::~BiasPage() {
  worker_->shutdown();  // the session dies with slot_ once the worker has let go of it
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
  worker_->cancel();
  worker_->invalidate();  // answers in flight are dropped: nothing will clear these flags
  evaluating_ = dirty_ = false;
  hasSession_ = false;
  forgetStack();  // the edits belong to the session being released
  // Release the session and its arrays (the model open now is of another kind).
  auto slot = slot_;
  worker_->submit(tr("Closing"), [slot](const std::function<bool()>&) -> WorkerQueue::Deliver {
    slot->session.reset();
    return {};
  }, /*cancellable=*/false, /*visible=*/false);
  note_->setText(html);
  stackWidget_->setCurrentIndex(0);
}

void BiasPage::open(const QString& modelPath, const QString& testSpec, const QString& trainSpec,
                    const QString& sessionDb, const QString& cachePath) {
  worker_->cancel();
  worker_->invalidate();  // answers in flight are dropped: nothing will clear these flags
  evaluating_ = dirty_ = false;
  hasSession_ = false;
  modelPath_ = modelPath;
  testSpec_ = testSpec;
  evaluation_.reset();
  clearComparisons();
  forgetStack();
  note_->setText(tr("<h3>Bias correction</h3><p><i>Computing the μMoE layer's coefficients for every sample of %1 "
                    "and %2 (progress in the status bar; Esc cancels)…</i></p>")
                     .arg(trainSpec.toHtmlEscaped(), testSpec.toHtmlEscaped()));
  stackWidget_->setCurrentIndex(0);
  editing::BiasSessionOptions options;
  options.model_path = modelPath.toStdString();
  options.test_spec = testSpec.toStdString();
  options.train_spec = trainSpec.toStdString();
  options.session_db = sessionDb.toStdString();
  options.cache_path = cachePath.toStdString();
  auto slot = slot_;
  WorkerQueue::Handlers endings;
  endings.failed = [this](const QString& message) {
    note_->setText(tr("<h3>Bias correction</h3><p style='color:#b02a2a'>%1</p>").arg(message.toHtmlEscaped()));
    stackWidget_->setCurrentIndex(0);
    Q_EMIT openFailed(message);
  };
  endings.cancelled = [this] {
    note_->setText(tr("<h3>Bias correction</h3><p>Cancelled. Open the model again (F5) to compute the study.</p>"));
  };
  worker_->submit(tr("Computing coefficients"), [this, slot, options](const std::function<bool()>& cancelled) -> WorkerQueue::Deliver {
    QElapsedTimer clock;
    clock.start();
    slot->session.reset();
    worker_->postProgress(tr("Computing coefficients"), 0, 1);
    auto session = editing::BiasSession::open(options, [&](int64_t done, int64_t total) {
      worker_->postProgress(tr("Computing coefficients"), done, total);
      return !cancelled();
    });
    const auto targets = toQStringList(session->target_names());
    const auto attributes = toQStringList(session->attribute_names());
    const int experts = static_cast<int>(session->expert_count());
    const auto stack = session->stack();
    // Start on the most under-served cell (the model as it is, applied edits included).
    std::optional<editing::BiasTask> initial;
    try {
      initial = session->worst_cell_task(stack.applied());
    } catch (const UsageError&) {
      // No output has a usable sensitive attribute: the first output; the page says why later.
    }
    slot->session = std::move(session);
    const double seconds = static_cast<double>(clock.nsecsElapsed()) / 1e9;
    return [this, targets, attributes, experts, stack, initial, seconds](double) {
      onOpened(targets, attributes, experts, stack, initial, seconds);
    };
  }, /*cancellable=*/true, /*visible=*/true, endings);
}

void BiasPage::onOpened(const QStringList& targets, const QStringList& attributes, int experts,
                        const editing::EditStack& stack, const std::optional<editing::BiasTask>& initial,
                        double seconds) {
  hasSession_ = true;
  targets_ = targets;
  attributes_ = attributes;
  experts_ = experts;
  const double n = experts;
  lambdaSpin_->blockSignals(true);
  lambdaSpin_->setRange(-2 * n, 2 * n);
  lambdaSpin_->setSingleStep(std::max(0.01, n / 100));
  lambdaSpin_->blockSignals(false);
  header_->setText(tr("<b>%1</b> · %2 outputs · %3 experts · metrics on %4 · opened in %5 s")
                       .arg(QFileInfo(modelPath_).fileName().toHtmlEscaped())
                       .arg(targets.size())
                       .arg(experts)
                       .arg(testSpec_.toHtmlEscaped())
                       .arg(seconds, 0, 'f', 1));
  target_->blockSignals(true);
  sensitive_->blockSignals(true);
  cell_->blockSignals(true);
  target_->clear();
  target_->addItems(targets);
  target_->setCurrentIndex(
      initial ? static_cast<int>(std::max<qsizetype>(0, targets.indexOf(QString::fromStdString(initial->target)))) : 0);
  fillSensitive(initial ? QString::fromStdString(initial->sensitive) : QString());
  fillCells();
  if (initial) {
    const int cell = cell_->findText(QString::fromStdString(initial->subpopulation.text()));
    if (cell >= 0) cell_->setCurrentIndex(cell);
  }
  target_->blockSignals(false);
  sensitive_->blockSignals(false);
  cell_->blockSignals(false);
  setStack(stack);
  stackWidget_->setCurrentIndex(1);
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
  if (!hasSession_) return;
  lambda_.reset();  // propose for the new task
  clearComparisons();
  requestEvaluation();
}

void BiasPage::setLambda(double lambda) {
  lambdaSpin_->setValue(lambda);  // → onSpinChanged (only when it changed)
  if (!lambda_ || *lambda_ != lambdaSpin_->value()) onSpinChanged(lambdaSpin_->value());
}

void BiasPage::onSliderMoved(int value) {
  if (!hasSession_) return;
  const double lambda = value / 100.0 * experts_;
  const bool block = lambdaSpin_->blockSignals(true);
  lambdaSpin_->setValue(lambda);
  lambdaSpin_->blockSignals(block);
  lambda_ = lambdaSpin_->value();
  requestEvaluation();
}

void BiasPage::onSpinChanged(double value) {
  if (!hasSession_) return;
  const bool block = slider_->blockSignals(true);
  slider_->setValue(static_cast<int>(std::lround(value / std::max(1, experts_) * 100)));
  slider_->blockSignals(block);
  lambda_ = value;
  requestEvaluation();
}

void BiasPage::requestEvaluation() {
  dirty_ = true;
  if (!evaluating_) submitEvaluation();
}

void BiasPage::submitEvaluation() {
  dirty_ = false;
  QString error;
  const auto task = currentTask(&error);
  if (!task) {
    editText_->setText(tr("<span style='color:#b02a2a'>%1</span>").arg(error.toHtmlEscaped()));
    applyButton_->setEnabled(false);
    return;
  }
  evaluating_ = true;
  const auto lambda = lambda_;
  auto slot = slot_;
  worker_->submit(
      tr("Evaluating"),
      [this, slot, task = *task, lambda](const std::function<bool()>&) -> WorkerQueue::Deliver {
        QElapsedTimer clock;
        clock.start();
        // The comparison `mumoe rewrite --session` prints: the note and the Propose button
        // follow the proposed λ even when the user's λ is evaluated.
        auto comparison = slot->get().preview(task, lambda);
        BiasEvaluation e;
        e.task = task;
        e.edit = std::move(comparison.edit);
        e.proposedLambda = comparison.proposed_lambda;
        e.before = std::move(comparison.before);
        e.after = std::move(comparison.after);
        e.coreMs = static_cast<double>(clock.nsecsElapsed()) / 1e6;
        const bool proposedNow = !lambda;
        return [this, e, proposedNow](double ms) mutable {
          e.latencyMs = ms;
          evaluating_ = false;
          proposed_ = e.proposedLambda;
          // The proposal fills the slider only if the user has not moved it since (then their
          // λ is queued: dirty_).
          if (proposedNow && !lambda_) {
            lambda_ = e.edit.lambda;
            const bool b1 = lambdaSpin_->blockSignals(true), b2 = slider_->blockSignals(true);
            lambdaSpin_->setValue(e.edit.lambda);
            slider_->setValue(static_cast<int>(std::lround(e.edit.lambda / std::max(1, experts_) * 100)));
            lambdaSpin_->blockSignals(b1);
            slider_->blockSignals(b2);
          }
          evaluation_ = std::move(e);
          showEvaluation();
          Q_EMIT evaluated();
          if (dirty_) submitEvaluation();
        };
      },
      /*cancellable=*/false, /*visible=*/false, {[this](const QString& message) { evaluationFailed(message); }, {}});
}

void BiasPage::evaluationFailed(const QString& message) {
  evaluating_ = false;
  editText_->setText(tr("<span style='color:#b02a2a'>%1</span>").arg(message.toHtmlEscaped()));
  applyButton_->setEnabled(false);
  if (dirty_) submitEvaluation();
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

void BiasPage::showComparison(const QString& name, const editing::VariantMetrics& metrics, int epoch) {
  if (epoch != comparisonEpoch_) return;  // computed for another task or edit stack
  comparisons_[name] = metrics;
  showEvaluation();
  Q_EMIT comparisonReady(name);
}

void BiasPage::compareBlind() {
  const auto task = currentTask();
  if (!task || !hasSession_) return;
  auto slot = slot_;
  const int epoch = comparisonEpoch_;
  worker_->submit(tr("Blind threshold"),
                  [this, slot, task = *task, epoch](const std::function<bool()>&) -> WorkerQueue::Deliver {
                    const auto m = slot->get().blind_threshold(task);
                    return [this, m, epoch](double) { showComparison(tr("Blind threshold"), m, epoch); };
                  }, true, true, {[this](const QString& message) { showErrorDialog(message); }, {}});
}

void BiasPage::compareOversample() {
  const auto task = currentTask();
  if (!task || !hasSession_) return;
  auto slot = slot_;
  const int epoch = comparisonEpoch_;
  worker_->postProgress(tr("Oversampling"), 0, 0);
  worker_->submit(tr("Oversampling"),
                  [this, slot, task = *task, epoch](const std::function<bool()>&) -> WorkerQueue::Deliver {
                    int64_t factor = 0;
                    const auto m = slot->get().oversample(task, {}, &factor);
                    return [this, m, factor, epoch](double) { showComparison(tr("Oversample ×%1").arg(factor), m, epoch); };
                  }, true, true, {[this](const QString& message) { showErrorDialog(message); }, {}});
}

void BiasPage::clearComparisons() {
  comparisons_.clear();
  ++comparisonEpoch_;  // baselines still being computed belong to what was shown before
}

void BiasPage::resyncWithCore() {
  auto slot = slot_;
  worker_->submit(tr("Reading edits"), [this, slot](const std::function<bool()>&) -> WorkerQueue::Deliver {
    const auto stack = slot->get().stack();
    return [this, stack](double) {
      if (pendingStackChanges_ == 0) setStack(stack);  // else the last change's answer shows it
    };
  }, false, false, {[this](const QString& message) { showErrorDialog(message); }, {}});
}

void BiasPage::applyEdit() {
  if (!evaluation_ || !hasSession_) return;
  const auto edit = evaluation_->edit;
  stack_.push(edit);  // discards undone edits, as the core's push will
  submitStackChange(tr("Applying the edit"), [edit](editing::BiasSession& session) { session.push(edit); });
}

void BiasPage::undoEdit() {
  if (!hasSession_ || !stack_.can_undo()) return;
  stack_.undo();
  submitStackChange(tr("Undo"), [](editing::BiasSession& session) { session.undo(); });
}

void BiasPage::redoEdit() {
  if (!hasSession_ || !stack_.can_redo()) return;
  stack_.redo();
  submitStackChange(tr("Redo"), [](editing::BiasSession& session) { session.redo(); });
}

void BiasPage::submitStackChange(const QString& task, std::function<void(editing::BiasSession&)> change) {
  ++pendingStackChanges_;
  showStack();
  auto slot = slot_;
  WorkerQueue::Handlers endings;
  endings.failed = [this](const QString& message) {
    --pendingStackChanges_;
    stackChangeFailed(message);
  };
  worker_->submit(task, [this, slot, change = std::move(change)](const std::function<bool()>&) -> WorkerQueue::Deliver {
    change(slot->get());  // saved in the session database before it returns
    const auto stack = slot->get().stack();
    return [this, stack](double) {
      // Changes queued behind this one would be shown undone for a moment: wait for the last.
      if (--pendingStackChanges_ == 0) setStack(stack);
    };
  }, false, false, std::move(endings));
}

void BiasPage::forgetStack() {
  pendingStackChanges_ = 0;  // the invalidated queue answers none of them
  stack_ = confirmed_ = editing::EditStack();
  updateEditActions();
}

void BiasPage::setStack(const editing::EditStack& stack) {
  const bool changed = hasSession_ && stack.to_json() != confirmed_.to_json();
  stack_ = confirmed_ = stack;
  showStack();
  if (changed) {
    clearComparisons();
    requestEvaluation();  // "before" is the model with the applied edits
    Q_EMIT stackChanged();
  }
}

void BiasPage::showStack() {
  edits_->clear();
  const auto& all = stack_.all();
  for (size_t i = 0; i < all.size(); ++i) {
    const bool applied = i < stack_.applied_count();
    auto* it = new QListWidgetItem(QStringLiteral("%1. %2%3")
                                       .arg(i + 1)
                                       .arg(QString::fromStdString(all[i].describe()))
                                       .arg(applied ? QString() : tr("  (undone)")));
    if (!applied) {
      it->setForeground(QColor(0x99, 0x99, 0x99));
      QFont f = it->font();
      f.setItalic(true);
      it->setFont(f);
    }
    edits_->addItem(it);
  }
  if (all.empty()) {
    auto* it = new QListWidgetItem(tr("No edits yet: choose λ and press Apply Edit."));
    it->setFlags(Qt::NoItemFlags);
    edits_->addItem(it);
  }
  exportButton_->setEnabled(hasSession_);
  updateEditActions();
}

void BiasPage::updateEditActions() {
  const bool canUndo = hasSession_ && stack_.can_undo(), canRedo = hasSession_ && stack_.can_redo();
  undoAction_->setEnabled(canUndo);
  redoAction_->setEnabled(canRedo);
  // The texts name the edit, as an undo stack's would ("Undo t += 3·…").
  undoAction_->setText(canUndo ? tr("Undo %1").arg(QString::fromStdString(stack_.all()[stack_.applied_count() - 1].describe()))
                               : tr("Undo"));
  redoAction_->setText(canRedo ? tr("Redo %1").arg(QString::fromStdString(stack_.all()[stack_.applied_count()].describe()))
                               : tr("Redo"));
}

void BiasPage::exportModel(const editing::BiasExportRequest& request) {
  if (!hasSession_) {
    Q_EMIT exportFinished(false, tr("No bias session is open"));
    return;
  }
  exportResult_->setText(tr("<i>Exporting to %1…</i>").arg(QString::fromStdString(request.output).toHtmlEscaped()));
  auto slot = slot_;
  WorkerQueue::Handlers endings;
  endings.failed = [this](const QString& message) {
    exportResult_->setText(tr("<span style='color:#b02a2a'>Export failed: %1</span>").arg(message.toHtmlEscaped()));
    Q_EMIT exportFinished(false, message);
  };
  endings.cancelled = [this] {
    exportResult_->setText(tr("Export cancelled; nothing was written."));
    Q_EMIT exportFinished(false, tr("cancelled"));
  };
  worker_->submit(tr("Exporting"), [this, slot, request](const std::function<bool()>& cancelled) -> WorkerQueue::Deliver {
    const auto report = slot->get().export_model(request, [&](uint64_t done, uint64_t total) {
      worker_->postProgress(tr("Exporting"), static_cast<qint64>(done), static_cast<qint64>(total));
      return !cancelled();
    });
    return [this, report](double) {
      const QString text = tr("Wrote %1 (%2 layout, %3 edit(s) folded). Reloaded and compared on %4 test samples: "
                              "max |difference| = %5 (%6 s).")
                               .arg(QString::fromStdString(report.output), QString::fromStdString(report.layout))
                               .arg(report.edits)
                               .arg(report.verified_samples)
                               .arg(report.max_abs_difference, 0, 'g', 3)
                               .arg(report.seconds, 0, 'f', 1);
      exportResult_->setText(QStringLiteral("<span style='color:#1b7f3b'>✔</span> ") + text.toHtmlEscaped());
      Q_EMIT exportFinished(true, text);
      if (errorDialogs_) QMessageBox::information(this, tr("Export verified"), text);
    };
  }, /*cancellable=*/true, /*visible=*/true, endings);
}

void BiasPage::chooseExport() {
  if (!hasSession_) return;
  if (const auto request = askBiasExport(this, modelPath_, stack_.applied_count())) exportModel(*request);
}

void BiasPage::showErrorDialog(const QString& message) {
  if (errorDialogs_) QMessageBox::warning(this, tr("Bias correction"), message);
}

void BiasPage::stackChangeFailed(const QString& message) {
  showErrorDialog(message);
  // The page moved its stack before the core did; the core rolled back: show what it holds.
  if (hasSession_) resyncWithCore();
}

void BiasPage::setControlsEnabled(bool enabled) {
  for (QWidget* w : std::initializer_list<QWidget*>{target_, sensitive_, cell_, slider_, lambdaSpin_, applyButton_,
                                                    blindButton_, oversampleButton_, exportButton_})
    w->setEnabled(enabled);
}

}  // namespace mumoe::ui
