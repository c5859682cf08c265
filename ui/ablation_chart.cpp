#include "ablation_chart.h"

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QHorizontalStackedBarSeries>
#include <QLabel>
#include <QLocale>
#include <QVBoxLayout>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "chart_style.h"
#include "session_controller.h"

namespace mumoe::ui {

AblationChart::AblationChart(QWidget* parent) : QWidget(parent) {
  const auto pane = makeChartPane(this, 220);
  summary_ = pane.summary;
  chart_ = pane.chart;
  view_ = pane.view;
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  clear();
}

void AblationChart::clear() {
  chart_->removeAllSeries();
  for (auto* axis : chart_->axes()) chart_->removeAxis(axis);
  chart_->setTitle(perOutput_ ? tr("Per-output accuracy change") : tr("Per-class accuracy change"));
  summary_->setText(perOutput_ ? tr("<i>Select experts and press Ablate (Ctrl+Return), or double-click an expert, to "
                                    "see what removing it does to each output.</i>")
                               : tr("<i>Select experts and press Ablate (Ctrl+Return), or double-click an expert, to "
                                    "see what removing it does to each class.</i>"));
  hasOutcome_ = false;
  overallChange_ = 0;
}

void AblationChart::setOutcome(const analysis::AblationOutcome& outcome, const analysis::ClassAccuracy& before,
                               const QStringList& classNames, const AnswerTiming& timing) {
  clear();
  outcome_ = outcome;
  hasOutcome_ = true;
  const auto classes = std::min(before.per_class.size(), outcome.after.per_class.size());
  std::vector<size_t> order(classes);
  std::iota(order.begin(), order.end(), 0);
  auto change = [&](size_t c) { return (outcome.after.per_class[c] - before.per_class[c]) * 100; };
  // Categories run bottom to top: largest gain first so that the largest loss ends up on top.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return change(a) > change(b); });

  auto* losses = makeBarSet(tr("accuracy lost"), QColor(0xd3, 0x2f, 0x2f));
  auto* gains = makeBarSet(tr("accuracy gained"), QColor(0x38, 0x8e, 0x3c));
  QStringList categories;
  double extreme = 0.5;
  for (size_t c : order) {
    const double d = change(c);
    categories << (static_cast<int>(c) < classNames.size() ? classNames[static_cast<int>(c)] : QString::number(c));
    *losses << std::min(d, 0.0);
    *gains << std::max(d, 0.0);
    extreme = std::max(extreme, std::abs(d));
  }
  auto* series = new QHorizontalStackedBarSeries;
  series->append(losses);
  series->append(gains);
  series->setBarWidth(0.7);
  chart_->addSeries(series);
  auto* y = new QBarCategoryAxis;
  y->append(categories);
  auto* x = new QValueAxis;
  const double bound = extreme * 1.1;
  x->setRange(-bound, bound);
  x->applyNiceNumbers();
  x->setLabelFormat(QStringLiteral("%+.1f"));
  x->setTitleText(perOutput_ ? tr("change in output accuracy (percentage points)")
                             : tr("change in class accuracy (percentage points)"));
  chart_->addAxis(y, Qt::AlignLeft);
  chart_->addAxis(x, Qt::AlignBottom);
  series->attachAxis(x);
  series->attachAxis(y);
  styleAxes(chart_);

  QStringList names;
  for (auto e : outcome.experts) names << QString::number(e);
  const QString what = outcome.experts.size() == 1 ? tr("Expert %1 removed").arg(names.first())
                                                   : tr("Experts %1 removed together").arg(names.join(QStringLiteral(", ")));
  chart_->setTitle((perOutput_ ? tr("%1 — per-output accuracy change") : tr("%1 — per-class accuracy change")).arg(what));

  overallChange_ = (outcome.after.overall - before.overall) * 100;
  const QLocale locale;
  const QString color = overallChange_ < -0.005 ? QStringLiteral("#c62828") : QStringLiteral("#2e7d32");
  QString poly = outcome.has_effect && std::isfinite(outcome.polysemanticity)
                     ? locale.toString(outcome.polysemanticity, 'f', 3)
                     : tr("— (no class changes)");
  summary_->setText(
      tr("<b>%1</b> (mode %2): accuracy %3 % → %4 % <b style='color:%5'>(%6 pp)</b> · %7 samples use it · "
         "%8 predictions change · polysemanticity %9 · <span style='color:#666'>%10</span>")
          .arg(what.toHtmlEscaped())
          .arg(outcome.mode)
          .arg(locale.toString(before.overall * 100, 'f', 2), locale.toString(outcome.after.overall * 100, 'f', 2), color,
               (overallChange_ >= 0 ? QStringLiteral("+") : QString()) + locale.toString(overallChange_, 'f', 2),
               locale.toString(qlonglong(outcome.affected_samples)), locale.toString(qlonglong(outcome.changed_predictions)),
               poly,
               timing.fromCache ? tr("from the cache, %1 ms").arg(timing.latencyMs, 0, 'f', 1)
                                : tr("computed in %1 s").arg(timing.coreSeconds, 0, 'f', 2)));
}

QVector<QPair<QString, double>> AblationChart::bars() const {
  QVector<QPair<QString, double>> out;
  const auto series = chart_->series();
  if (series.isEmpty()) return out;
  auto* bars = static_cast<QHorizontalStackedBarSeries*>(series.first());
  const auto sets = bars->barSets();
  const auto axes = chart_->axes(Qt::Vertical);
  if (sets.size() != 2 || axes.isEmpty()) return out;
  const QStringList categories = static_cast<QBarCategoryAxis*>(axes.first())->categories();
  for (int i = static_cast<int>(categories.size()) - 1; i >= 0; --i)
    out.append({categories[i], sets[0]->at(i) + sets[1]->at(i)});
  return out;
}

QString AblationChart::summaryText() const {
  return summary_->text();
}

}  // namespace mumoe::ui
