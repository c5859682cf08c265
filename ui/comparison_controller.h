// ComparisonController: the Compare page's jobs. One analysis::compare_layer per model file (the
// call `mumoe compare` makes: it extracts and sweeps what the cache lacks) on the page's
// WorkerQueue, under the queue's one staleness rule: the rows of a comparison that was cleared
// (another data set, cache or layer) never arrive. The page only shows finished rows.
//
// Torch-free header.
#pragma once

#include <QObject>
#include <QString>

#include "analysis/layer_comparison.h"

namespace mumoe::ui {

class WorkerQueue;

class ComparisonController : public QObject {
  Q_OBJECT

 public:
  explicit ComparisonController(QObject* parent = nullptr);
  ~ComparisonController() override;  ///< cancels and waits for the running comparison

  /// The queue (the main window's progress bar and Cancel, and tests).
  WorkerQueue* worker() const { return worker_; }

  /// Queues the comparison of `modelPath` on `data` (SPEC), `cachePath` ("" = the core's default)
  /// and `layer` ("" = its only layer): compared() follows, or the queue's failed() (the status
  /// bar says why).
  void compare(const QString& modelPath, const QString& data, const QString& cachePath, const QString& layer);
  /// Cancels the comparisons queued or running and drops their rows.
  void clear();

 Q_SIGNALS:
  void compared(const mumoe::analysis::LayerComparison& row);

 private:
  WorkerQueue* worker_ = nullptr;
};

}  // namespace mumoe::ui
