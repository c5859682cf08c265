#include "sweep_chart.h"

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QLabel>
#include <QLineSeries>
#include <QLocale>
#include <QToolTip>
#include <QCursor>
#include <QVBoxLayout>
#include <QValueAxis>

#include <algorithm>
#include <cmath>

#include "chart_style.h"

namespace mumoe::ui {

constexpr size_t kShown = 40;

SweepChart::SweepChart(QWidget* parent) : QWidget(parent) {
  const auto pane = makeChartPane(this, 200);
  summary_ = pane.summary;
  chart_ = pane.chart;
  view_ = pane.view;
  clear();
}

void SweepChart::clear() {
  chart_->removeAllSeries();
  for (auto* axis : chart_->axes()) chart_->removeAxis(axis);
  chart_->setTitle(tr("Sweep: every expert removed in turn"));
  summary_->setText(tr("<i>Run the sweep (Analysis ▸ Run Sweep, Ctrl+Shift+Return) to remove every expert in turn.</i>"));
  experts_.clear();
  hasSweep_ = false;
}

void SweepChart::setSweep(const analysis::SweepOutcome& sweep, const analysis::ClassAccuracy& before) {
  clear();
  hasSweep_ = true;
  std::vector<const analysis::AblationOutcome*> shown;
  for (const auto& e : sweep.experts)
    if (e.has_effect && std::isfinite(e.polysemanticity)) shown.push_back(&e);
  // The experts whose removal costs most accuracy first; at most kShown of them (readable labels).
  std::stable_sort(shown.begin(), shown.end(), [](auto* a, auto* b) { return a->after.overall < b->after.overall; });
  const size_t withEffect = shown.size();
  if (shown.size() > kShown) shown.resize(kShown);

  auto* poly = makeBarSet(tr("polysemanticity p"), QColor(0x3f, 0x6f, 0xb5));
  auto* change = new QLineSeries;
  change->setName(tr("overall accuracy change (pp, right axis)"));
  change->setPen(QPen(QColor(0xd3, 0x2f, 0x2f), 1.6));
  change->setPointsVisible(true);
  QStringList categories;
  double lowest = 0, highest = 1;
  int i = 0;
  for (auto* e : shown) {
    const qint64 expert = e->experts.empty() ? -1 : e->experts.front();
    experts_ << expert;
    categories << QString::number(expert);
    *poly << e->polysemanticity;
    highest = std::max(highest, e->polysemanticity);
    const double d = (e->after.overall - before.overall) * 100;
    change->append(i++, d);
    lowest = std::min(lowest, d);
  }
  auto* bars = new QBarSeries;
  bars->append(poly);
  bars->setBarWidth(0.8);
  chart_->addSeries(bars);
  chart_->addSeries(change);
  auto* x = new QBarCategoryAxis;
  x->append(categories);
  // Experts ≥ 100 were elided to "1…": upright and whole where there are many.
  if (categories.size() > 16) x->setLabelsAngle(-90);
  x->setTruncateLabels(false);
  x->setTitleText(withEffect > shown.size() ? tr("expert (the %1 whose removal costs most accuracy, of %2 with an effect)")
                                                  .arg(shown.size())
                                                  .arg(withEffect)
                                            : tr("expert (sorted by accuracy change)"));
  auto* y = new QValueAxis;
  y->setRange(0, std::ceil(highest * 1.05 * 2) / 2);
  y->setTickCount(static_cast<int>(std::ceil(highest * 1.05 * 2)) + 1);
  y->setTitleText(tr("polysemanticity"));
  y->setLabelFormat(QStringLiteral("%.2f"));
  auto* y2 = new QValueAxis;
  y2->setRange(lowest * 1.1 - 0.05, 0);
  y2->applyNiceNumbers();
  y2->setTitleText(tr("Δ accuracy (pp)"));
  // Enough decimals to tell the ticks apart (a block whose removals cost 0.04 pp needs two).
  const double step = (y2->max() - y2->min()) / std::max(1, y2->tickCount() - 1);
  const int decimals = step > 0 ? std::clamp(static_cast<int>(std::ceil(-std::log10(step))), 1, 4) : 1;
  y2->setLabelFormat(QStringLiteral("%.%1f").arg(decimals));
  y2->setLabelsColor(QColor(0xd3, 0x2f, 0x2f));
  chart_->addAxis(x, Qt::AlignBottom);
  chart_->addAxis(y, Qt::AlignLeft);
  chart_->addAxis(y2, Qt::AlignRight);
  bars->attachAxis(x);
  bars->attachAxis(y);
  change->attachAxis(x);
  change->attachAxis(y2);
  styleAxes(chart_);
  y2->setGridLineVisible(false);

  connect(bars, &QBarSeries::clicked, this, [this](int index, QBarSet*) {
    if (index >= 0 && index < experts_.size()) Q_EMIT expertClicked(experts_[index]);
  });
  connect(bars, &QBarSeries::hovered, this, [this, shown, before](bool status, int index, QBarSet*) {
    if (!status || index < 0 || index >= static_cast<int>(shown.size())) return QToolTip::hideText();
    (void)before;
    QToolTip::showText(QCursor::pos(), tr("Expert %1: polysemanticity %2, %3 predictions change")
                                           .arg(experts_[index])
                                           .arg(shown[static_cast<size_t>(index)]->polysemanticity, 0, 'f', 3)
                                           .arg(shown[static_cast<size_t>(index)]->changed_predictions));
  });

  const QLocale locale;
  chart_->setTitle(tr("Sweep of mode %1: polysemanticity and accuracy change of each expert's ablation").arg(sweep.mode));
  summary_->setText((perOutput_ ? tr("<b>%1 of %2 experts</b> change some output's accuracy when removed · mean "
                                     "polysemanticity <b>%3</b> (‖d − onehot‖ over the outputs: lower = more "
                                     "specialised; 0 only when a removal wipes out one output and touches no other) · "
                                     "computed in %4 s")
                                : tr("<b>%1 of %2 experts</b> change some class accuracy when removed · mean "
                                     "polysemanticity <b>%3</b> (‖d − onehot‖: lower = more specialised; 0 only when a "
                                     "removal wipes out one class and touches no other) · computed in %4 s"))
                        .arg(sweep.experts_with_effect)
                        .arg(sweep.experts.size())
                        .arg(std::isfinite(sweep.mean_polysemanticity) ? locale.toString(sweep.mean_polysemanticity, 'f', 3)
                                                                       : QStringLiteral("—"))
                        .arg(locale.toString(sweep.seconds, 'f', 2)));
}

QString SweepChart::summaryText() const { return summary_->text(); }

QVector<double> SweepChart::polysemanticity() const {
  QVector<double> out;
  const auto series = chart_->series();
  if (series.isEmpty()) return out;
  const auto sets = static_cast<QBarSeries*>(series.first())->barSets();
  if (sets.isEmpty()) return out;
  for (int i = 0; i < sets.first()->count(); ++i) out << sets.first()->at(i);
  return out;
}

}  // namespace mumoe::ui
