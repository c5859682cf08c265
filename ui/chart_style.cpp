#include "chart_style.h"

#include <QAbstractAxis>
#include <QApplication>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QLabel>
#include <QPainter>
#include <QVBoxLayout>
#include <QFont>
#include <QLegend>

namespace mumoe::ui {

QBarSet* makeBarSet(const QString& name, const QColor& colour) {
  auto* set = new QBarSet(name);
  set->setColor(colour);
  set->setBorderColor(Qt::transparent);
  return set;
}

void styleChart(QChart* chart) {
  chart->setTheme(QChart::ChartThemeLight);
  chart->setDropShadowEnabled(false);
  chart->setBackgroundRoundness(0);
  chart->setMargins(QMargins(6, 6, 6, 6));
  chart->setAnimationOptions(QChart::NoAnimation);
  QFont title = QApplication::font();
  title.setBold(true);
  chart->setTitleFont(title);
  chart->legend()->setAlignment(Qt::AlignBottom);
  chart->legend()->setFont(QApplication::font());
}

void styleAxes(QChart* chart) {
  QFont small = QApplication::font();
  small.setPointSizeF(small.pointSizeF() * 0.9);
  for (auto* axis : chart->axes()) {
    axis->setLabelsFont(small);
    axis->setTitleFont(small);
    axis->setGridLineColor(QColor(0xe0, 0xe0, 0xe0));
    axis->setLinePenColor(QColor(0xa0, 0xa0, 0xa0));
  }
}

ChartPane makeChartPane(QWidget* owner, int minimumChartHeight) {
  ChartPane pane;
  pane.summary = new QLabel;
  pane.summary->setWordWrap(true);
  pane.summary->setTextFormat(Qt::RichText);
  pane.chart = new QChart;
  styleChart(pane.chart);
  pane.view = new QChartView(pane.chart);
  pane.view->setRenderHint(QPainter::Antialiasing);
  pane.view->setMinimumHeight(minimumChartHeight);
  auto* layout = new QVBoxLayout(owner);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(pane.summary);
  layout->addWidget(pane.view, 1);
  return pane;
}

}  // namespace mumoe::ui
