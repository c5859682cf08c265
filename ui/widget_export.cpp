#include "widget_export.h"

#include <QFileInfo>
#include <QObject>
#include <QPainter>
#include <QPixmap>
#include <QSvgGenerator>
#include <QWidget>

namespace mumoe::ui {

QString exportFileFilter() { return QObject::tr("PNG image (*.png);;SVG image (*.svg)"); }

bool exportWidget(QWidget* widget, const QString& path, QString* error) {
  auto fail = [&](const QString& why) {
    if (error) *error = QStringLiteral("%1: %2").arg(path, why);
    return false;
  };
  if (!widget) return fail(QObject::tr("nothing to export"));
  const QString suffix = QFileInfo(path).suffix().toLower();
  if (suffix == QLatin1String("svg")) {
    QSvgGenerator svg;
    svg.setFileName(path);
    svg.setSize(widget->size());
    svg.setViewBox(QRect(QPoint(0, 0), widget->size()));
    svg.setTitle(widget->windowTitle().isEmpty() ? QStringLiteral("mumoe-studio") : widget->windowTitle());
    svg.setDescription(QObject::tr("Exported from mumoe-studio"));
    QPainter painter;
    if (!painter.begin(&svg)) return fail(QObject::tr("cannot write the SVG file"));
    widget->render(&painter);
    painter.end();
    if (!QFileInfo(path).exists() || QFileInfo(path).size() == 0) return fail(QObject::tr("cannot write the SVG file"));
    return true;
  }
  if (suffix != QLatin1String("png")) return fail(QObject::tr("unknown image type (use .png or .svg)"));
  if (!widget->grab().save(path, "PNG")) return fail(QObject::tr("cannot write the PNG file"));
  return true;
}

}  // namespace mumoe::ui
