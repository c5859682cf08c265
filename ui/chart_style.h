// One look for every chart of the app: light theme, no drop shadow, tight margins, the
// application font, quiet grid lines.
#pragma once

class QBarSet;
class QChart;
class QColor;
class QString;
class QChartView;
class QLabel;
class QWidget;

namespace mumoe::ui {

void styleChart(QChart* chart);

/// A chart page's parts: a rich-text summary line above a styled, antialiased chart.
struct ChartPane {
  QLabel* summary;
  QChart* chart;
  QChartView* view;
};
/// Builds them inside `owner` (summary on top, the chart taking the rest, no margins).
ChartPane makeChartPane(QWidget* owner, int minimumChartHeight);
/// Applies fonts and grid colours to the axes the chart has now.
void styleAxes(QChart* chart);
/// A bar set named `name` (the legend's text) in flat `colour`, without the outline Qt draws.
QBarSet* makeBarSet(const QString& name, const QColor& colour);

}  // namespace mumoe::ui
