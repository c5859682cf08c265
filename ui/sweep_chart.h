// SweepChart: the full sweep of one expert mode (core SweepOutcome) — every expert removed in
// turn. Bars: the polysemanticity of the (at most 40) experts whose removal costs most accuracy,
// most harmful first; a line: their overall accuracy change (right axis). Clicking a bar selects that expert (expertClicked).
#pragma once

#include <QStringList>
#include <QVector>
#include <QWidget>

#include "analysis/ablation_results.h"

class QChart;
class QChartView;
class QLabel;

namespace mumoe::ui {

class SweepChart : public QWidget {
  Q_OBJECT

 public:
  explicit SweepChart(QWidget* parent = nullptr);

  void setSweep(const analysis::SweepOutcome& sweep, const analysis::ClassAccuracy& before);
  void clear();
  /// A multi-label model's sweep: its summary speaks of outputs, not classes.
  void setPerOutput(bool perOutput) { perOutput_ = perOutput; }
  bool hasSweep() const { return hasSweep_; }
  /// The experts shown, in bar order.
  const QVector<qint64>& experts() const { return experts_; }
  /// The bar heights (polysemanticity) in bar order.
  QVector<double> polysemanticity() const;
  QChartView* chartView() const { return view_; }
  /// The line under the chart: how many experts have an effect, the mean and what it means.
  QString summaryText() const;

 Q_SIGNALS:
  void expertClicked(qint64 expert);

 private:
  QLabel* summary_ = nullptr;
  QChartView* view_ = nullptr;
  QChart* chart_ = nullptr;
  QVector<qint64> experts_;
  bool hasSweep_ = false;
  bool perOutput_ = false;
};

}  // namespace mumoe::ui
