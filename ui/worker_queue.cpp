#include "worker_queue.h"

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QtConcurrent/QtConcurrentRun>

#include <algorithm>
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

void WorkerQueue::submit(const QString& task, Job job, bool cancellable, bool visible, Handlers handlers) {
  const auto flag = std::make_shared<std::atomic<bool>>(false);
  live_.push_back({handlers.topic, flag});
  const int generation = generation_;
  const QString topic = handlers.topic;
  const int topicGeneration = topicGenerations_.value(topic);
  ++pending_;
  if (visible && ++visiblePending_ == 1) Q_EMIT busyChanged(true);
  QElapsedTimer clock;
  clock.start();
  auto run = [this, job = std::move(job), task, flag, generation, topic, topicGeneration, cancellable, visible, clock,
              handlers = std::move(handlers)] {
    const std::function<bool()> isCancelled = [flag] { return flag->load(); };
    Deliver deliver;
    try {
      if (cancellable && isCancelled()) throw Cancelled();
      deliver = job(isCancelled);
    } catch (const Cancelled&) {
      deliver = [this, task, handlers](double) {
        if (handlers.cancelled) handlers.cancelled();
        Q_EMIT cancelled(task);
      };
    } catch (const std::exception& e) {
      const QString message = QString::fromUtf8(e.what());
      deliver = [this, task, message, handlers](double) {
        if (handlers.failed) handlers.failed(message);
        Q_EMIT failed(task, message);
      };
    } catch (...) {
      deliver = [this, task, handlers](double) {
        const QString message = tr("unknown error");
        if (handlers.failed) handlers.failed(message);
        Q_EMIT failed(task, message);
      };
    }
    QMetaObject::invokeMethod(
        this,
        [this, deliver = std::move(deliver), flag, generation, topic, topicGeneration, visible, clock] {
          live_.erase(std::remove_if(live_.begin(), live_.end(), [&](const LiveJob& j) { return j.cancelled == flag; }),
                      live_.end());
          const bool current = generation == generation_ && topicGeneration == topicGenerations_.value(topic);
          if (current && deliver) deliver(static_cast<double>(clock.nsecsElapsed()) / 1e6);
          --pending_;
          if (visible && --visiblePending_ == 0) Q_EMIT busyChanged(false);
        },
        Qt::QueuedConnection);
  };
  (void)QtConcurrent::run(&pool_, std::move(run));
}

void WorkerQueue::cancel() {
  for (const auto& job : live_) *job.cancelled = true;
}

void WorkerQueue::cancel(const QString& topic) {
  if (topic.isEmpty()) return;
  for (const auto& job : live_)
    if (job.topic == topic) *job.cancelled = true;
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
