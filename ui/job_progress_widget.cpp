#include "job_progress_widget.h"

#include <QAction>
#include <QHBoxLayout>
#include <QLabel>
#include <QProgressBar>
#include <QToolButton>

#include <algorithm>

#include "format.h"
#include "job_monitor.h"

namespace mumoe::ui {

JobProgressWidget::JobProgressWidget(JobMonitor* monitor, QAction* cancelAction, QWidget* parent)
    : QWidget(parent), cancelAction_(cancelAction) {
  eta_ = new QLabel;
  bar_ = new QProgressBar;
  bar_->setMaximumWidth(420);
  bar_->setTextVisible(true);
  cancel_ = new QToolButton;
  cancel_->setDefaultAction(cancelAction_);
  cancel_->setToolButtonStyle(Qt::ToolButtonIconOnly);
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(eta_);
  layout->addWidget(bar_);
  layout->addWidget(cancel_);
  connect(monitor, &JobMonitor::progress, this, &JobProgressWidget::onProgress);
  connect(monitor, &JobMonitor::busyChanged, this, &JobProgressWidget::onBusyChanged);
  cancelAction_->setEnabled(false);
  hide();
}

void JobProgressWidget::onProgress(const QString& task, qint64 done, qint64 total, double etaSeconds) {
  bar_->setRange(0, static_cast<int>(std::max<qint64>(total, 1)));
  bar_->setValue(static_cast<int>(done));
  bar_->setFormat(QStringLiteral("%1 %p%").arg(task));
  // Wide enough for the task's name and "100%" (a fixed width clipped "Computing coefficie…").
  bar_->setMinimumWidth(std::min(420, bar_->fontMetrics().horizontalAdvance(task + QStringLiteral(" 100%")) + 32));
  // Under a second the estimate says nothing (cached chunks count as done at once: "0.0 s" at 30 %).
  eta_->setText(etaSeconds >= 1 && done < total ? tr("ETA %1").arg(durationText(etaSeconds)) : QString());
  eta_->setVisible(!eta_->text().isEmpty());
  show();
}

void JobProgressWidget::onBusyChanged(bool busy) {
  cancelAction_->setEnabled(busy);
  if (!busy) {
    hide();
    return;
  }
  if (!isVisible()) {
    bar_->setRange(0, 0);  // a busy bar until the first progress report
    bar_->setFormat(QString());
    eta_->hide();
    show();
  }
}

}  // namespace mumoe::ui
