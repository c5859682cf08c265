// The Bias page's Export… dialog: where to write the edited model, in which layout, verified on how
// many test samples. It never lets the source model be replaced without an explicit confirmation.
#pragma once

#include <QString>

#include <cstddef>
#include <optional>

#include "editing/bias_session.h"

class QWidget;

namespace mumoe::ui {

/// Asks for an export of `appliedEdits` edits of `modelPath`; nullopt when the user cancels
/// (the dialog, or the confirmation to replace an existing file — `overwrite` is set only then).
std::optional<editing::ExportRequest> askBiasExport(QWidget* parent, const QString& modelPath,
                                                        std::size_t appliedEdits);

}  // namespace mumoe::ui
