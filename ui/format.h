// Small text formatting helpers shared by the views (Qt only, no torch).
#pragma once

#include <QString>
#include <QStringList>

#include <cstdint>
#include <string>
#include <vector>

#include "nn/layer_config.h"

namespace mumoe::ui {

/// 1069568 → "1,069,568" in the user's locale.
QString groupedNumber(int64_t n);
/// {16, 8} → "16 × 8".
QString joinDims(const std::vector<int64_t>& dims, const QString& separator = QStringLiteral(" × "));
/// "R = 512" or "(4, 4, 512)".
QString rankText(const nn::LayerConfig& config);
/// "768 → 1000", "768 → 3072 → GELU → 768".
QString shapeText(const nn::LayerConfig& config);
/// "batchnorm + entmax15, input LayerNorm".
QString gatingText(const nn::LayerConfig& config);
/// The core's names (classes, attributes, targets) as Qt strings (UTF-8).
QStringList toQStringList(const std::vector<std::string>& names);
/// 4.25 → "4.3 s", 75 → "1 min 15 s"; "" for a negative (unknown) duration.
QString durationText(double seconds);

}  // namespace mumoe::ui
