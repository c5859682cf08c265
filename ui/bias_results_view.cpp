#include "bias_results_view.h"

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QHeaderView>
#include <QLabel>
#include <QLocale>
#include <QTableWidget>
#include <QVBoxLayout>
#include <QValueAxis>

#include <cmath>
#include <limits>

#include "chart_style.h"

namespace mumoe::ui {

namespace {

enum MetricRow { TargetSub, EqOpp, StdBias, MaxMin, TargetAcc, TestAcc, Mrs, MetricRows };

QString pct(double v) { return QStringLiteral("%1 %").arg(v * 100, 0, 'f', 2); }
QString signedPoints(double v) {
  return QStringLiteral("%1%2 pp").arg(v >= 0 ? QStringLiteral("+") : QString()).arg(v * 100, 0, 'f', 2);
}

double metricValue(const editing::VariantMetrics& m, int row) {
  switch (row) {
    case TargetSub: return m.report.target_subpopulation_accuracy;
    case EqOpp: return m.report.equality_of_opportunity;
    case StdBias: return m.report.std_bias;
    case MaxMin: return m.report.max_min;
    case TargetAcc: return m.report.target_accuracy;
    case TestAcc: return m.test_accuracy;
    default: return m.mrs.value_or(std::numeric_limits<double>::quiet_NaN());
  }
}

/// +1 when larger is better, −1 when smaller is better.
int better(int row) { return row == EqOpp || row == StdBias ? -1 : 1; }

/// MRS is relative already (to the Before column): the reference shows a dash, and so does the
/// difference.
QString metricText(double v, int row) {
  if (std::isnan(v)) return QStringLiteral("—");
  return row == Mrs ? QString::number(v, 'f', 4) : pct(v);
}

QString deltaText(double d, int row) {
  if (row == Mrs || std::isnan(d)) return QStringLiteral("—");
  return signedPoints(d);
}

QTableWidgetItem* item(const QString& text, Qt::Alignment align = Qt::AlignRight | Qt::AlignVCenter) {
  auto* it = new QTableWidgetItem(text);
  it->setTextAlignment(align);
  it->setFlags(Qt::ItemIsEnabled | Qt::ItemIsSelectable);
  return it;
}

void colourDelta(QTableWidgetItem* it, double d, int direction) {
  if (std::isnan(d) || std::fabs(d) < 5e-5) return;
  it->setForeground(d * direction > 0 ? QColor(0x1b, 0x7f, 0x3b) : QColor(0xb0, 0x2a, 0x2a));
}

void fitTableHeight(QTableWidget* t) {
  int h = t->horizontalHeader()->height() + 2 * t->frameWidth();
  for (int r = 0; r < t->rowCount(); ++r) h += t->rowHeight(r);
  t->setFixedHeight(h);
}

}  // namespace

BiasResultsView::BiasResultsView(QWidget* parent) : QWidget(parent) {
  auto* v = new QVBoxLayout(this);
  v->setContentsMargins(6, 0, 0, 0);

  metrics_ = new QTableWidget(MetricRows, 3);
  metrics_->setHorizontalHeaderLabels({tr("Before"), tr("After"), tr("Difference")});
  metrics_->setVerticalHeaderLabels({tr("Target subpopulation accuracy"), tr("Equality of opportunity (gap, ↓)"),
                                     tr("STD bias (↓)"), tr("Max-Min (lowest cell, ↑)"), tr("Target output accuracy"),
                                     tr("Test accuracy (all outputs)"), tr("MRS (vs. Before)")});
  metrics_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  metrics_->setSelectionMode(QAbstractItemView::NoSelection);
  metrics_->setFocusPolicy(Qt::NoFocus);
  metrics_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  metrics_->verticalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  metrics_->setAlternatingRowColors(true);

  cells_ = new QTableWidget(4, 5);
  cells_->setHorizontalHeaderLabels({tr("Cell"), tr("Samples"), tr("Before"), tr("After"), tr("Difference")});
  cells_->verticalHeader()->hide();
  cells_->verticalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  cells_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  cells_->setSelectionMode(QAbstractItemView::NoSelection);
  cells_->setFocusPolicy(Qt::NoFocus);
  cells_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  cells_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::ResizeToContents);
  cells_->setAlternatingRowColors(true);

  chart_ = new QChart;
  styleChart(chart_);
  chart_->setTitle(tr("Accuracy of the four subpopulations"));
  chartView_ = new QChartView(chart_);
  chartView_->setRenderHint(QPainter::Antialiasing);
  chartView_->setMinimumHeight(220);

  timing_ = new QLabel;
  timing_->setStyleSheet(QStringLiteral("color:#777"));

  v->addWidget(metrics_);
  v->addWidget(cells_);
  v->addWidget(chartView_, 1);
  v->addWidget(timing_);
}

void BiasResultsView::show(const BiasEvaluation& e, const QMap<QString, editing::VariantMetrics>& comparisons) {
  // Metrics: before / after / difference, then the comparisons.
  const QStringList names = comparisons.keys();
  metrics_->setColumnCount(3 + names.size());
  QStringList headers{tr("Before"), tr("After"), tr("Difference")};
  for (const auto& n : names) headers << n;
  metrics_->setHorizontalHeaderLabels(headers);
  for (int r = 0; r < MetricRows; ++r) {
    const double b = metricValue(e.before, r), a = metricValue(e.after, r);
    metrics_->setItem(r, 0, item(metricText(b, r)));
    metrics_->setItem(r, 1, item(metricText(a, r)));
    auto* d = item(deltaText(a - b, r));
    colourDelta(d, a - b, better(r));
    metrics_->setItem(r, 2, d);
    for (int c = 0; c < names.size(); ++c) metrics_->setItem(r, 3 + c, item(metricText(metricValue(comparisons[names[c]], r), r)));
  }
  fitTableHeight(metrics_);

  // The four cells, target cell first; a column (and bars) per baseline compared.
  cells_->setColumnCount(5 + static_cast<int>(names.size()));
  QStringList cellHeaders{tr("Cell"), tr("Samples"), tr("Before"), tr("After"), tr("Difference")};
  for (const auto& n : names) cellHeaders << n;
  cells_->setHorizontalHeaderLabels(cellHeaders);
  QList<QBarSet*> baselineSets;
  static const QColor kBaselineColours[] = {QColor(0xe0, 0x8e, 0x2b), QColor(0x6a, 0x9f, 0x58), QColor(0x8e, 0x6c, 0xb8)};
  for (int c = 0; c < names.size(); ++c) {
    baselineSets << new QBarSet(names[c]);
    baselineSets.back()->setColor(kBaselineColours[c % 3]);
  }
  const auto& rb = e.before.report;
  const auto& ra = e.after.report;
  const QString t = QString::fromStdString(e.task.target), s = QString::fromStdString(e.task.sensitive);
  int row = 0;
  QStringList categories;
  auto* setBefore = new QBarSet(tr("Before"));
  auto* setAfter = new QBarSet(tr("After"));
  setBefore->setColor(QColor(0x9e, 0xa7, 0xb3));
  setAfter->setColor(QColor(0x2f, 0x6f, 0xb3));
  for (int tv : {1, 0})
    for (int sv : {1, 0}) {
      const bool isTarget = rb.target_value == tv && rb.sensitive_value == sv;
      const QString label = QStringLiteral("%1=%2 & %3=%4").arg(t).arg(tv).arg(s).arg(sv);
      auto* name = item(isTarget ? QStringLiteral("★ ") + label : label, Qt::AlignLeft | Qt::AlignVCenter);
      if (isTarget) {
        QFont f = name->font();
        f.setBold(true);
        name->setFont(f);
        name->setToolTip(tr("The target subpopulation"));
      }
      cells_->setItem(row, 0, name);
      cells_->setItem(row, 1, item(QLocale().toString(static_cast<qlonglong>(rb.cells[tv][sv].count))));
      cells_->setItem(row, 2, item(pct(rb.cell_accuracy(tv, sv))));
      cells_->setItem(row, 3, item(pct(ra.cell_accuracy(tv, sv))));
      const double d = ra.cell_accuracy(tv, sv) - rb.cell_accuracy(tv, sv);
      auto* di = item(signedPoints(d));
      colourDelta(di, d, 1);
      cells_->setItem(row, 4, di);
      for (int c = 0; c < names.size(); ++c) {
        const double v = comparisons[names[c]].report.cell_accuracy(tv, sv);
        cells_->setItem(row, 5 + c, item(pct(v)));
        *baselineSets[c] << v * 100;
      }
      ++row;
      categories << QStringLiteral("%1%2 / %3").arg(isTarget ? QStringLiteral("★ ") : QString()).arg(tv).arg(sv);
      *setBefore << rb.cell_accuracy(tv, sv) * 100;
      *setAfter << ra.cell_accuracy(tv, sv) * 100;
    }
  fitTableHeight(cells_);

  chart_->removeAllSeries();
  for (auto* axis : chart_->axes()) chart_->removeAxis(axis);
  auto* series = new QBarSeries;
  series->append(setBefore);
  series->append(setAfter);
  for (auto* set : baselineSets) series->append(set);
  series->setLabelsVisible(true);
  series->setLabelsFormat(QStringLiteral("@value"));
  series->setLabelsPrecision(3);
  series->setLabelsPosition(QAbstractBarSeries::LabelsInsideEnd);
  chart_->addSeries(series);
  auto* x = new QBarCategoryAxis;
  x->append(categories);
  x->setTitleText(tr("%1 / %2").arg(t, s));
  auto* y = new QValueAxis;
  y->setRange(0, 100);
  y->setTickCount(6);
  y->setLabelFormat(QStringLiteral("%d %"));
  y->setTitleText(tr("accuracy"));
  chart_->addAxis(x, Qt::AlignBottom);
  chart_->addAxis(y, Qt::AlignLeft);
  series->attachAxis(x);
  series->attachAxis(y);
  styleAxes(chart_);
  setBefore->setLabelColor(Qt::black);
  setAfter->setLabelColor(Qt::white);
  timing_->setText(tr("λ = %1 · metrics in %2 ms (core %3 ms) on %4 test samples")
                       .arg(e.edit.lambda, 0, 'f', 2)
                       .arg(e.latencyMs, 0, 'f', 1)
                       .arg(e.coreMs, 0, 'f', 1)
                       .arg(QLocale().toString(static_cast<qlonglong>(rb.samples))));
}

}  // namespace mumoe::ui
