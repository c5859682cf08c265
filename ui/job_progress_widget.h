// JobProgressWidget: the status bar's view of the JobMonitor — the running task's name and
// percentage (a busy bar until its first report), its ETA, and the Cancel button (the Esc action
// it is given). Hidden while nothing runs; the action is enabled exactly while something does.
#pragma once

#include <QWidget>

class QAction;
class QLabel;
class QProgressBar;
class QToolButton;

namespace mumoe::ui {

class JobMonitor;

class JobProgressWidget : public QWidget {
  Q_OBJECT

 public:
  /// Follows `monitor`; `cancelAction` (not owned) should trigger monitor->cancelAll().
  JobProgressWidget(JobMonitor* monitor, QAction* cancelAction, QWidget* parent = nullptr);

  QProgressBar* progressBar() const { return bar_; }
  QLabel* etaLabel() const { return eta_; }

 private:
  void onProgress(const QString& task, qint64 done, qint64 total, double etaSeconds);
  void onBusyChanged(bool busy);

  QAction* cancelAction_ = nullptr;
  QLabel* eta_ = nullptr;
  QProgressBar* bar_ = nullptr;
  QToolButton* cancel_ = nullptr;
};

}  // namespace mumoe::ui
