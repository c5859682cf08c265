#include "controls.h"

#include <QDoubleSpinBox>
#include <QSplitter>
#include <QString>

namespace mumoe::ui {

QSplitter* makeSplitter(Qt::Orientation orientation, const QString& name, QWidget* first, QWidget* second,
                        int firstStretch, int secondStretch) {
  auto* splitter = new QSplitter(orientation);
  if (!name.isEmpty()) splitter->setObjectName(name);
  splitter->addWidget(first);
  splitter->addWidget(second);
  splitter->setStretchFactor(0, firstStretch);
  splitter->setStretchFactor(1, secondStretch);
  return splitter;
}

QDoubleSpinBox* makeThresholdBox(double minimum, const QString& prefix) {
  auto* box = new QDoubleSpinBox;
  box->setRange(minimum, 1.0);
  box->setSingleStep(0.05);
  box->setValue(0.5);
  box->setPrefix(prefix);
  return box;
}

}  // namespace mumoe::ui
