#include "worker_queue.h"

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QtConcurrent/QtConcurrentRun>

#include <exception>

#include "io/errors.h"

namespace mumoe::ui {

WorkerQueue::WorkerQueue(QObject* parent) : QObject(parent) {
  pool_.setMaxThreadCount(1);  // sessions are not thread-safe: one job at a time, in order
  pool_.setExpiryTimeout(-1);
}

WorkerQueue::~WorkerQueue() {
  cancel();
  pool_.waitForDone();
}

void WorkerQueue::submit(const QString& task, Job job, bool cancellable, bool visible) {
  const int epoch = cancelEpoch_.load();
  const int generation = generation_;
  ++pending_;
  if (visible && ++visiblePending_ == 1) Q_EMIT busyChanged(true);
  QElapsedTimer clock;
  clock.start();
  auto run = [this, job = std::move(job), task, epoch, generation, cancellable, visible, clock] {
    const std::function<bool()> isCancelled = [this, epoch] { return cancelEpoch_.load() != epoch; };
    Deliver deliver;
    try {
      if (cancellable && isCancelled()) throw Cancelled();
      deliver = job(isCancelled);
    } catch (const Cancelled&) {
      deliver = [this, task](double) { Q_EMIT cancelled(task); };
    } catch (const std::exception& e) {
      const QString message = QString::fromUtf8(e.what());
      deliver = [this, task, message](double) { Q_EMIT failed(task, message); };
    } catch (...) {
      deliver = [this, task](double) { Q_EMIT failed(task, tr("unknown error")); };
    }
    QMetaObject::invokeMethod(
        this,
        [this, deliver = std::move(deliver), generation, visible, clock] {
          if (generation == generation_ && deliver) deliver(static_cast<double>(clock.nsecsElapsed()) / 1e6);
          --pending_;
          if (visible && --visiblePending_ == 0) Q_EMIT busyChanged(false);
        },
        Qt::QueuedConnection);
  };
  (void)QtConcurrent::run(&pool_, std::move(run));
}

void WorkerQueue::postProgress(const QString& task, qint64 done, qint64 total, double eta) {
  QMetaObject::invokeMethod(
      this, [this, task, done, total, eta] { Q_EMIT progress(task, done, total, eta); }, Qt::QueuedConnection);
}

void WorkerQueue::shutdown() {
  cancel();
  invalidate();
  pool_.waitForDone();
}

void WorkerQueue::waitForIdle() {
  while (pending_ > 0) {
    pool_.waitForDone();
    QCoreApplication::sendPostedEvents(this);
    QCoreApplication::processEvents();
  }
}

}  // namespace mumoe::ui
