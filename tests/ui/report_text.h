// What the UI tests compare when the window and `mumoe report` write the same report: the page's
// text without the one line that says when it was made.
#pragma once

#include <QFile>
#include <QRegularExpression>
#include <QString>

namespace mumoe::testkit {

/// The report at `path` without its "generated" line; "" when it cannot be read.
inline QString reportWithoutDate(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return QString();
  return QString::fromUtf8(f.readAll()).remove(QRegularExpression(QStringLiteral("<dt>generated</dt><dd>[^<]*</dd>")));
}

}  // namespace mumoe::testkit
