// JobMonitor: the one place that knows whether the GUI is busy. Every page's WorkerQueue (the
// analysis session's, the bias session's, the text session's, steering's, the comparison's) is
// tracked here; the main window's progress bar, ETA label and Cancel (Esc) show and act on the
// monitor alone, so a job of any page is seen and can be stopped from anywhere.
//
//   * busy: true while any tracked queue has a visible job (the first queue to finish does not
//     clear the bar while another still works);
//   * progress: the latest report of any queue, with an ETA — the job's own when it gives one,
//     otherwise estimated here from the rate since the task's first report;
//   * cancelAll(): cancels the running and queued cancellable jobs of every queue;
//   * failed / cancelled: every queue's endings, for the status bar (the submitting page shows
//     the error where it belongs through its own WorkerQueue::Handlers).
#pragma once

#include <QElapsedTimer>
#include <QHash>
#include <QObject>
#include <QPointer>
#include <QString>
#include <QVector>

namespace mumoe::ui {

class WorkerQueue;

class JobMonitor : public QObject {
  Q_OBJECT

 public:
  explicit JobMonitor(QObject* parent = nullptr);

  /// Starts watching `queue` (not owned; forgotten when it is destroyed).
  void track(WorkerQueue* queue);
  /// Stops forwarding anything from every queue and cancels and invalidates their jobs (for an
  /// owner being destroyed: no answer may reach it any more).
  void detachAll();
  bool isBusy() const;

  /// The ETA for `done` of `total` when the job gives none (etaSeconds < 0): the rate since the
  /// task's first report. < 0 while unknown (no progress yet, or no total).
  static double estimateEta(double secondsSinceFirst, qint64 doneAtFirst, qint64 done, qint64 total);

 public Q_SLOTS:
  void cancelAll();

 Q_SIGNALS:
  void busyChanged(bool busy);
  /// `etaSeconds` < 0 when unknown.
  void progress(const QString& task, qint64 done, qint64 total, double etaSeconds);
  void failed(const QString& task, const QString& message);
  void cancelled(const QString& task);

 private:
  void onProgress(const QString& task, qint64 done, qint64 total, double eta);
  void onBusyChanged();

  struct Start {
    QElapsedTimer clock;
    qint64 done = 0;
  };
  QVector<QPointer<WorkerQueue>> queues_;
  QHash<QString, Start> starts_;  ///< per task, while busy
  bool busy_ = false;
};

}  // namespace mumoe::ui
