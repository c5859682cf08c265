// Builders of the controls several pages share, so that the same control looks and behaves the
// same on every page (Qt only, no torch).
#pragma once

#include <Qt>

class QDoubleSpinBox;
class QSplitter;
class QString;
class QWidget;

namespace mumoe::ui {

/// A splitter of `first` and `second` sharing space firstStretch : secondStretch. `name` is its
/// object name, under which the main window saves and restores its sizes ("" = not saved).
QSplitter* makeSplitter(Qt::Orientation orientation, const QString& name, QWidget* first, QWidget* second,
                        int firstStretch, int secondStretch);

/// A coefficient threshold from `minimum` to 1 in steps of 0.05, starting at 0.5, shown after
/// `prefix` ("load: a ≥ ").
QDoubleSpinBox* makeThresholdBox(double minimum, const QString& prefix);

}  // namespace mumoe::ui
