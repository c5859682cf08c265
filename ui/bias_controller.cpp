#include "bias_controller.h"

#include <QElapsedTimer>

#include "analysis/expert_report.h"
#include "cache/analysis_cache.h"
#include "io/errors.h"
#include "format.h"
#include "session_slot.h"
#include "worker_queue.h"

namespace mumoe::ui {

struct BiasController::Slot : SessionSlot<editing::BiasSession> {
  Slot() : SessionSlot("bias session") {}
};

namespace {

// The baselines' staleness topic on the worker queue (dropComparisons).
const QString kComparisonTopic = QStringLiteral("baselines");

}  // namespace

BiasController::BiasController(QObject* parent)
    : QObject(parent), worker_(new WorkerQueue(this)), slot_(std::make_shared<Slot>()) {}

BiasController::~BiasController() {
  worker_->shutdown();  // the session dies with slot_ once the worker has let go of it
}

void BiasController::forgetSession() {
  worker_->cancel();
  worker_->invalidate();  // answers in flight are dropped: nothing would clear the flags below
  hasSession_ = false;
  evaluating_ = false;
  pending_.reset();
  pendingStackChanges_ = 0;
  stack_ = confirmed_ = editing::EditStack();
  dropComparisons();
}

void BiasController::close() {
  forgetSession();
  worker_->submit(tr("Closing"), [slot = slot_](const std::function<bool()>&) -> WorkerQueue::Deliver {
    slot->reset();
    return {};
  }, /*cancellable=*/false, /*visible=*/false);
  Q_EMIT stackShown();
}

void BiasController::open(const editing::BiasSessionOptions& options) {
  forgetSession();
  Q_EMIT stackShown();
  WorkerQueue::Handlers endings;
  endings.failed = [this](const QString& message) { Q_EMIT openFailed(message); };
  endings.cancelled = [this] { Q_EMIT openCancelled(); };
  const QString task = tr("Computing coefficients");
  worker_->submit(task, [this, slot = slot_, options, task](const std::function<bool()>& cancelled) -> WorkerQueue::Deliver {
    QElapsedTimer clock;
    clock.start();
    slot->reset();
    worker_->postProgress(task, 0, 1);
    auto session = editing::BiasSession::open(options, [&](int64_t done, int64_t total) {
      worker_->postProgress(task, done, total);
      return !cancelled();
    });
    BiasOpening opening;
    opening.targets = toQStringList(session->target_names());
    opening.attributes = toQStringList(session->attribute_names());
    opening.experts = static_cast<int>(session->expert_count());
    opening.stack = session->stack();
    // Start on the most under-served cell (the model as it is, applied edits included).
    try {
      opening.initial = session->worst_cell_task(opening.stack.applied());
    } catch (const UsageError&) {
      // No output has a usable sensitive attribute: the page starts on the first output.
    }
    slot->open(std::move(session));
    opening.seconds = static_cast<double>(clock.nsecsElapsed()) / 1e9;
    return [this, opening](double) {
      hasSession_ = true;
      stack_ = confirmed_ = opening.stack;
      Q_EMIT opened(opening);
      Q_EMIT stackShown();
    };
  }, /*cancellable=*/true, /*visible=*/true, std::move(endings));
}

void BiasController::evaluate(const editing::BiasTask& task, std::optional<double> lambda) {
  if (!hasSession_) return;
  if (evaluating_) {
    pending_ = Request{task, lambda};  // replaces any older waiting request
    return;
  }
  submitEvaluation(Request{task, lambda});
}

void BiasController::submitEvaluation(Request request) {
  evaluating_ = true;
  const auto next = [this] {
    evaluating_ = false;
    if (pending_) submitEvaluation(*std::exchange(pending_, std::nullopt));
  };
  WorkerQueue::Handlers endings;
  endings.failed = [this, next](const QString& message) {
    Q_EMIT evaluationFailed(message);
    next();
  };
  worker_->submit(
      tr("Evaluating"),
      [this, slot = slot_, request, next](const std::function<bool()>&) -> WorkerQueue::Deliver {
        QElapsedTimer clock;
        clock.start();
        // The comparison `mumoe rewrite --session` prints; it also tells the proposed λ when
        // the user's λ is evaluated.
        auto comparison = slot->get().preview(request.task, request.lambda);
        BiasEvaluation e;
        e.task = request.task;
        e.edit = std::move(comparison.edit);
        e.proposedLambda = comparison.proposed_lambda;
        e.before = std::move(comparison.before);
        e.after = std::move(comparison.after);
        e.coreMs = static_cast<double>(clock.nsecsElapsed()) / 1e6;
        const bool proposed = !request.lambda;
        return [this, e, proposed, next](double ms) mutable {
          e.latencyMs = ms;
          Q_EMIT evaluated(e, proposed);
          next();
        };
      },
      /*cancellable=*/false, /*visible=*/false, std::move(endings));
}

void BiasController::submitComparison(
    const QString& task, const std::function<QString(editing::BiasSession&, editing::VariantMetrics&)>& run) {
  if (!hasSession_) return;
  WorkerQueue::Handlers endings;
  endings.failed = [this](const QString& message) { Q_EMIT comparisonFailed(message); };
  endings.topic = kComparisonTopic;  // dropComparisons() makes it stale: computed for another view
  worker_->submit(task, [this, slot = slot_, run](const std::function<bool()>&) -> WorkerQueue::Deliver {
    editing::VariantMetrics metrics;
    const QString name = run(slot->get(), metrics);
    return [this, name, metrics](double) { Q_EMIT comparisonReady(name, metrics); };
  }, /*cancellable=*/true, /*visible=*/true, std::move(endings));
}

void BiasController::dropComparisons() { worker_->invalidate(kComparisonTopic); }

void BiasController::compareBlind(const editing::BiasTask& task) {
  submitComparison(tr("Blind threshold"), [task](editing::BiasSession& session, editing::VariantMetrics& metrics) {
    metrics = session.blind_threshold(task);
    return tr("Blind threshold");
  });
}

void BiasController::compareOversample(const editing::BiasTask& task) {
  worker_->postProgress(tr("Oversampling"), 0, 0);  // seconds of training: a busy bar at once
  submitComparison(tr("Oversampling"), [task](editing::BiasSession& session, editing::VariantMetrics& metrics) {
    int64_t factor = 0;
    metrics = session.oversample(task, {}, &factor);
    return tr("Oversample ×%1").arg(factor);
  });
}

void BiasController::apply(const editing::LogitEdit& edit) {
  if (!hasSession_) return;
  stack_.push(edit);  // discards undone edits, as the core's push will
  submitStackChange(tr("Applying the edit"), [edit](editing::BiasSession& session) { session.push(edit); });
}

void BiasController::undo() {
  if (!hasSession_ || !stack_.can_undo()) return;
  stack_.undo();
  submitStackChange(tr("Undo"), [](editing::BiasSession& session) { session.undo(); });
}

void BiasController::redo() {
  if (!hasSession_ || !stack_.can_redo()) return;
  stack_.redo();
  submitStackChange(tr("Redo"), [](editing::BiasSession& session) { session.redo(); });
}

void BiasController::submitStackChange(const QString& task, std::function<void(editing::BiasSession&)> change) {
  ++pendingStackChanges_;
  Q_EMIT stackShown();
  WorkerQueue::Handlers endings;
  endings.failed = [this](const QString& message) {
    --pendingStackChanges_;
    Q_EMIT stackChangeFailed(message);
    // The page showed the change before the core made it; the core rolled back: read it back.
    if (hasSession_) resyncStack();
  };
  worker_->submit(task, [this, slot = slot_, change = std::move(change)](const std::function<bool()>&) -> WorkerQueue::Deliver {
    change(slot->get());  // saved in the session database before it returns
    const auto stack = slot->get().stack();
    return [this, stack](double) {
      // Changes queued behind this one would be shown undone for a moment: wait for the last.
      if (--pendingStackChanges_ == 0) setStack(stack);
    };
  }, /*cancellable=*/false, /*visible=*/false, std::move(endings));
}

void BiasController::resyncStack() {
  WorkerQueue::Handlers endings;
  endings.failed = [this](const QString& message) { Q_EMIT stackChangeFailed(message); };
  worker_->submit(tr("Reading edits"), [this, slot = slot_](const std::function<bool()>&) -> WorkerQueue::Deliver {
    const auto stack = slot->get().stack();
    return [this, stack](double) {
      if (pendingStackChanges_ == 0) setStack(stack);  // else the last change's answer shows it
    };
  }, /*cancellable=*/false, /*visible=*/false, std::move(endings));
}

void BiasController::setStack(const editing::EditStack& stack) {
  const bool changed = stack.to_json() != confirmed_.to_json();
  stack_ = confirmed_ = stack;
  Q_EMIT stackShown();
  if (changed) {
    dropComparisons();
    Q_EMIT stackChanged();
  }
}

void BiasController::exportModel(const editing::ExportRequest& request) {
  if (!hasSession_) {
    Q_EMIT exportFailed(tr("No bias session is open"));
    return;
  }
  WorkerQueue::Handlers endings;
  endings.failed = [this](const QString& message) { Q_EMIT exportFailed(message); };
  endings.cancelled = [this] { Q_EMIT exportCancelled(); };
  const QString task = tr("Exporting");
  worker_->submit(task, [this, slot = slot_, request, task](const std::function<bool()>& cancelled) -> WorkerQueue::Deliver {
    const auto report = slot->get().export_model(request, [&](uint64_t done, uint64_t total) {
      worker_->postProgress(task, static_cast<qint64>(done), static_cast<qint64>(total));
      return !cancelled();
    });
    return [this, report](double) { Q_EMIT exported(report); };
  }, /*cancellable=*/true, /*visible=*/true, std::move(endings));
}

void BiasController::exportReport(const QString& path, const editing::BiasTask& task, bool baselines) {
  if (!hasSession_) {
    Q_EMIT reportFailed(tr("No bias session is open"));
    return;
  }
  WorkerQueue::Handlers endings;
  endings.failed = [this](const QString& message) { Q_EMIT reportFailed(message); };
  worker_->submit(tr("Writing the report"), [this, slot = slot_, path, task, baselines](const std::function<bool()>&) -> WorkerQueue::Deliver {
    auto& session = slot->get();
    editing::BiasReportRequest request;  // as `mumoe report MODEL --target … --session DB` asks
    request.model_path = session.options().model_path;
    request.data_spec = session.options().test_spec;
    request.baselines = baselines;
    request.app_version = MUMOE_VERSION;
    const auto bytes = static_cast<qint64>(analysis::write_report(
        session.report(task, request), path.toStdString(),
        {{request.model_path, "the model"},
         {session.session_db_path(), "the edit session"},
         {session.options().cache_path.empty() ? cache::default_cache_path() : session.options().cache_path,
          "the analysis cache"}}));
    return [this, path, bytes](double) { Q_EMIT reportExported(path, bytes); };
  }, /*cancellable=*/false, /*visible=*/true, std::move(endings));
}

}  // namespace mumoe::ui
