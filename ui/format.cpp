#include "format.h"

#include <QObject>

#include <QLocale>
#include <QStringList>

namespace mumoe::ui {

QString groupedNumber(int64_t n) { return QLocale().toString(static_cast<qlonglong>(n)); }

QString joinDims(const std::vector<int64_t>& dims, const QString& separator) {
  QStringList parts;
  for (auto d : dims) parts << QString::number(d);
  return parts.join(separator);
}

QString rankText(const nn::LayerConfig& c) {
  if (c.factorization == nn::Factorization::CP) return QStringLiteral("R = %1").arg(c.cp_rank);
  return QStringLiteral("(%1)").arg(joinDims(c.tr_ranks, QStringLiteral(", ")));
}

QString shapeText(const nn::LayerConfig& c) {
  QString text = QStringLiteral("%1 → %2").arg(c.input_dim).arg(c.output_dim);
  if (c.is_block()) text += QStringLiteral(" → GELU → %1").arg(c.second_dim);
  return text;
}

QString gatingText(const nn::LayerConfig& c) {
  QString text = QString::fromStdString(nn::to_string(c.gate_norm) + " + " + nn::to_string(c.gate_activation));
  if (c.input_layer_norm) text += QStringLiteral(", input LayerNorm");
  return text;
}

QString durationText(double seconds) {
  if (seconds < 0) return {};
  if (seconds < 60) return QObject::tr("%1 s").arg(seconds, 0, 'f', seconds < 10 ? 1 : 0);
  return QObject::tr("%1 min %2 s").arg(int(seconds) / 60).arg(int(seconds) % 60);
}

QStringList toQStringList(const std::vector<std::string>& names) {
  QStringList out;
  for (const auto& n : names) out << QString::fromStdString(n);
  return out;
}

}  // namespace mumoe::ui
