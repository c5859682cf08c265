// AblationChart: what removing one or several experts does (core AblationOutcome) — a sorted
// horizontal bar chart of the per-class accuracy change in percentage points (losses red, gains
// green; the largest loss on top) under a one-line summary: overall accuracy before → after,
// samples affected, predictions changed, polysemanticity, and whether the answer came from the
// cache.
#pragma once

#include <QPair>
#include <QStringList>
#include <QVector>
#include <QWidget>

#include "analysis/ablation_results.h"

class QChart;
class QChartView;
class QLabel;

namespace mumoe::ui {

struct AnswerTiming;

class AblationChart : public QWidget {
  Q_OBJECT

 public:
  explicit AblationChart(QWidget* parent = nullptr);

  void setOutcome(const analysis::AblationOutcome& outcome, const analysis::ClassAccuracy& before,
                  const QStringList& classNames, const AnswerTiming& timing);
  void clear();
  /// A multi-label model's bars are its outputs: the titles say "output" instead of "class".
  void setPerOutput(bool perOutput) {
    perOutput_ = perOutput;
    if (!hasOutcome_) clear();  // the placeholder title says it too
  }
  bool hasOutcome() const { return hasOutcome_; }
  const analysis::AblationOutcome& outcome() const { return outcome_; }

  /// The bars as the chart holds them, top to bottom: (class name, change in percentage points).
  QVector<QPair<QString, double>> bars() const;
  /// Overall accuracy change in percentage points.
  double overallChange() const { return overallChange_; }
  QString summaryText() const;
  QChartView* chartView() const { return view_; }

 private:
  QLabel* summary_ = nullptr;
  QChartView* view_ = nullptr;
  QChart* chart_ = nullptr;
  analysis::AblationOutcome outcome_;
  double overallChange_ = 0;
  bool hasOutcome_ = false;
  bool perOutput_ = false;
};

}  // namespace mumoe::ui
