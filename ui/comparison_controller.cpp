#include "comparison_controller.h"

#include <QFileInfo>

#include "worker_queue.h"

namespace mumoe::ui {

ComparisonController::ComparisonController(QObject* parent) : QObject(parent), worker_(new WorkerQueue(this)) {}

ComparisonController::~ComparisonController() { worker_->shutdown(); }

void ComparisonController::compare(const QString& modelPath, const QString& data, const QString& cachePath,
                                   const QString& layer) {
  const QString task = tr("Comparing %1").arg(QFileInfo(modelPath).fileName());
  analysis::SessionOptions o;
  o.model_path = modelPath.toStdString();
  o.data_spec = data.toStdString();
  o.cache_path = cachePath.toStdString();
  o.layer = layer.toStdString();
  WorkerQueue* worker = worker_;
  // The job's body touches only the queue; the row reaches the GUI thread only while current.
  worker_->submit(task, [this, o, task, worker](const std::function<bool()>& cancelled) -> WorkerQueue::Deliver {
    const auto row = analysis::compare_layer(o, [&](const std::string& step, int64_t done, int64_t total, double eta) {
      worker->postProgress(task + QStringLiteral(" · ") + QString::fromStdString(step), done, total, eta);
      return !cancelled();
    });
    return [this, row](double) { Q_EMIT compared(row); };
  });
}

void ComparisonController::clear() {
  worker_->cancel();
  worker_->invalidate();
}

}  // namespace mumoe::ui
