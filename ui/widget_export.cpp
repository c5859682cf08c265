#include "widget_export.h"

#include <QBuffer>
#include <QFileInfo>
#include <QObject>
#include <QPainter>
#include <QPixmap>
#include <QSvgGenerator>
#include <QWidget>

#include "io/atomic_file.h"
#include "io/errors.h"

namespace mumoe::ui {

QString exportFileFilter() { return QObject::tr("PNG image (*.png);;SVG image (*.svg)"); }

namespace {

// Through the core's atomic writer, like every file the app writes: a FIFO or device at the path
// is refused, an interrupted write leaves the old file, the old file's permissions are kept.
bool writeAtomically(const QString& path, const QByteArray& bytes, QString* error) {
  try {
    io::AtomicFileWriter out(path.toStdString());
    out.write(bytes.constData(), static_cast<std::size_t>(bytes.size()));
    out.commit();
    return true;
  } catch (const Error& e) {
    if (error) *error = QString::fromStdString(e.what());
    return false;
  }
}

}  // namespace

bool exportWidget(QWidget* widget, const QString& path, QString* error) {
  auto fail = [&](const QString& why) {
    if (error) *error = QStringLiteral("%1: %2").arg(path, why);
    return false;
  };
  if (!widget) return fail(QObject::tr("nothing to export"));
  const QString suffix = QFileInfo(path).suffix().toLower();
  QByteArray bytes;
  QBuffer buffer(&bytes);
  buffer.open(QIODevice::WriteOnly);
  if (suffix == QLatin1String("svg")) {
    QSvgGenerator svg;
    svg.setOutputDevice(&buffer);
    svg.setSize(widget->size());
    svg.setViewBox(QRect(QPoint(0, 0), widget->size()));
    svg.setTitle(widget->windowTitle().isEmpty() ? QStringLiteral("mumoe-studio") : widget->windowTitle());
    svg.setDescription(QObject::tr("Exported from mumoe-studio"));
    QPainter painter;
    if (!painter.begin(&svg)) return fail(QObject::tr("cannot render the SVG image"));
    widget->render(&painter);
    painter.end();
  } else if (suffix == QLatin1String("png")) {
    if (!widget->grab().save(&buffer, "PNG")) return fail(QObject::tr("cannot encode the PNG image"));
  } else {
    return fail(QObject::tr("unknown image type (use .png or .svg)"));
  }
  if (bytes.isEmpty()) return fail(QObject::tr("nothing was rendered"));
  return writeAtomically(path, bytes, error);
}

}  // namespace mumoe::ui
