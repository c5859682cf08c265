#include "chart_style.h"

#include <QAbstractAxis>
#include <QApplication>
#include <QChart>
#include <QFont>
#include <QLegend>

namespace mumoe::ui {

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

}  // namespace mumoe::ui
