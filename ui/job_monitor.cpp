#include "job_monitor.h"

#include "worker_queue.h"

namespace mumoe::ui {

JobMonitor::JobMonitor(QObject* parent) : QObject(parent) {}

void JobMonitor::track(WorkerQueue* queue) {
  queues_.push_back(queue);
  connect(queue, &WorkerQueue::progress, this, &JobMonitor::onProgress);
  connect(queue, &WorkerQueue::busyChanged, this, &JobMonitor::onBusyChanged);
  connect(queue, &WorkerQueue::failed, this, &JobMonitor::failed);
  connect(queue, &WorkerQueue::cancelled, this, &JobMonitor::cancelled);
}

void JobMonitor::detachAll() {
  for (const auto& queue : queues_) {
    if (!queue) continue;
    disconnect(queue, nullptr, this, nullptr);
    queue->cancel();
    queue->invalidate();
  }
  queues_.clear();
}

bool JobMonitor::isBusy() const {
  for (const auto& queue : queues_)
    if (queue && queue->isBusy()) return true;
  return false;
}

void JobMonitor::cancelAll() {
  for (const auto& queue : queues_)
    if (queue) queue->cancel();
}

double JobMonitor::estimateEta(double secondsSinceFirst, qint64 doneAtFirst, qint64 done, qint64 total) {
  if (total <= 0 || done >= total || done <= doneAtFirst || secondsSinceFirst <= 0) return -1;
  const double rate = static_cast<double>(done - doneAtFirst) / secondsSinceFirst;
  return static_cast<double>(total - done) / rate;
}

void JobMonitor::onProgress(const QString& task, qint64 done, qint64 total, double eta) {
  auto it = starts_.find(task);
  if (it == starts_.end() || done < it->done) {  // a new run of the task starts its own clock
    Start start;
    start.clock.start();
    start.done = done;
    it = starts_.insert(task, start);
  }
  if (eta < 0) eta = estimateEta(static_cast<double>(it->clock.nsecsElapsed()) / 1e9, it->done, done, total);
  Q_EMIT progress(task, done, total, eta);
}

void JobMonitor::onBusyChanged() {
  const bool busy = isBusy();
  if (!busy) starts_.clear();
  if (busy == busy_) return;
  busy_ = busy;
  Q_EMIT busyChanged(busy);
}

}  // namespace mumoe::ui
