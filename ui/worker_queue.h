// WorkerQueue: one private worker thread for a page's core session (the bias session, the text
// analysis session, steering, model comparison). Jobs run on the worker one at a time, in order;
// each returns a continuation that runs on the GUI thread. cancel() flips the flag of every job
// submitted so far, cancel(topic) those of one topic's jobs: long jobs poll it (their core
// callbacks then throw mumoe::Cancelled) and queued cancellable jobs are dropped. Jobs submitted
// afterwards run normally.
//
// Staleness has one rule, for every page (as hotspot's JobTracker): an answer is delivered only
// if nothing made it stale after its job was submitted. invalidate() makes every job submitted so
// far stale (a replaced session or model); invalidate(topic) only the jobs submitted under that
// topic (Handlers::topic: e.g. baselines computed for a view that has changed since). A stale
// job's answer and endings are dropped; no page keeps an epoch or generation counter of its own.
//
// A job that does not deliver ends in its own Handlers (GUI thread): the page that submitted it
// shows the error or the cancellation where it belongs, without routing by task name. Every
// ending is also announced as failed(task, message) / cancelled(task), with the task's display
// name, for the main window's status bar.
#pragma once

#include <QHash>
#include <QObject>
#include <QString>
#include <QThreadPool>

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

namespace mumoe::ui {

class WorkerQueue : public QObject {
  Q_OBJECT

 public:
  /// Runs on the GUI thread with the request-to-answer latency in ms.
  using Deliver = std::function<void(double latencyMs)>;
  /// Runs on the worker; `cancelled` polls the cancel flag. Throws to fail the job.
  using Job = std::function<Deliver(const std::function<bool()>& cancelled)>;
  /// The job's own endings, run on the GUI thread before the signals (unless invalidated).
  struct Handlers {
    std::function<void(const QString& message)> failed;  ///< it threw (anything but Cancelled)
    std::function<void()> cancelled;                      ///< it was cancelled
    QString topic;  ///< cancel(topic) stops this job, invalidate(topic) drops its answer (empty: none)
  };

  explicit WorkerQueue(QObject* parent = nullptr);
  ~WorkerQueue() override;  ///< cancels and waits for the running job

  /// `task`: the display name ("Steering", "bias"); `visible`: counts for busyChanged (the status
  /// bar's progress).
  void submit(const QString& task, Job job, bool cancellable = true, bool visible = true, Handlers handlers = {});
  /// Thread-safe: reports progress of a long job (from the worker).
  void postProgress(const QString& task, qint64 done, qint64 total, double etaSeconds = -1);
  void cancel();                       ///< every job submitted so far
  void cancel(const QString& topic);   ///< those submitted under `topic` (empty: none)
  void invalidate() { ++generation_; }                            ///< every job submitted so far
  /// Those submitted under `topic` (an empty topic names none: nothing happens).
  void invalidate(const QString& topic) {
    if (!topic.isEmpty()) ++topicGenerations_[topic];
  }
  bool isBusy() const { return visiblePending_ > 0; }
  int pending() const { return pending_; }
  /// Blocks until every queued job has finished and its answer is delivered (tests).
  void waitForIdle();
  /// For an owner's destructor: cancels, drops every answer, and waits for the worker without
  /// running the event loop (which, inside a widget tree being destroyed, would deliver events
  /// to half-destroyed widgets).
  void shutdown();

 Q_SIGNALS:
  void progress(const QString& task, qint64 done, qint64 total, double etaSeconds);
  void busyChanged(bool busy);
  void failed(const QString& task, const QString& message);
  void cancelled(const QString& task);

 private:
  QThreadPool pool_;
  /// The jobs not answered yet and their cancel flags (GUI thread only; the worker reads a flag).
  struct LiveJob {
    QString topic;
    std::shared_ptr<std::atomic<bool>> cancelled;
  };
  std::vector<LiveJob> live_;
  int generation_ = 0;
  QHash<QString, int> topicGenerations_;
  int pending_ = 0;
  int visiblePending_ = 0;
};

}  // namespace mumoe::ui
