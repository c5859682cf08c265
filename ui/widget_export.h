// Writes a widget (a chart, a gallery) to an image file: PNG (pixels as on screen, at the
// screen's device pixel ratio) or SVG (vector, through QSvgGenerator), chosen by the suffix.
#pragma once

#include <QString>

class QWidget;

namespace mumoe::ui {

/// Returns false and sets *error (naming the file) when the file cannot be written.
bool exportWidget(QWidget* widget, const QString& path, QString* error = nullptr);
/// "PNG image (*.png);;SVG image (*.svg)" for file dialogs.
QString exportFileFilter();

}  // namespace mumoe::ui
