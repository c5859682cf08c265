// One look for every chart of the app: light theme, no drop shadow, tight margins, the
// application font, quiet grid lines.
#pragma once

class QChart;

namespace mumoe::ui {

void styleChart(QChart* chart);
/// Applies fonts and grid colours to the axes the chart has now.
void styleAxes(QChart* chart);

}  // namespace mumoe::ui
