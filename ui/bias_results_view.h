// BiasResultsView: what the Bias page shows for one evaluation of the λ slider — the metrics
// table (before / after / difference, then one column per baseline), the four cells of
// target × sensitive, a before/after bar chart and the timing line. It only displays finished,
// typed results (editing/variant_metrics.h); the page decides what to evaluate and when.
#pragma once

#include <QMap>
#include <QString>
#include <QWidget>

#include "bias_controller.h"
#include "editing/bias_task.h"
#include "editing/logit_edit.h"
#include "editing/variant_metrics.h"

class QChart;
class QChartView;
class QLabel;
class QTableWidget;

namespace mumoe::ui {

class BiasResultsView : public QWidget {
  Q_OBJECT

 public:
  explicit BiasResultsView(QWidget* parent = nullptr);

  /// Fills the tables, the chart and the timing line; `comparisons` are the baselines by column
  /// title (their MRS, like After's, is against Before).
  void show(const BiasEvaluation& evaluation, const QMap<QString, editing::VariantMetrics>& comparisons);

  QTableWidget* metricsTable() const { return metrics_; }
  /// The four cells: name, samples, Before, After, Difference, then a column per baseline compared.
  QTableWidget* cellsTable() const { return cells_; }
  QTableWidget* cellTable() const { return cells_; }
  QChartView* chartView() const { return chartView_; }

 private:
  QTableWidget* metrics_ = nullptr;
  QTableWidget* cells_ = nullptr;
  QChart* chart_ = nullptr;
  QChartView* chartView_ = nullptr;
  QLabel* timing_ = nullptr;
};

}  // namespace mumoe::ui
