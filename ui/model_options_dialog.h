// File ▸ Model Options…: how to open a model file whose weights cannot say it all (a timm ViT's
// MLP activation and preprocessing, a ViT's heads, a ResNet's input size, a TorchScript backbone
// in front of a μMoE head, the class names, a plain state dict's gate activation, the state dict
// of a checkpoint that holds several). The choices
// are saved beside the model (model/open_options.h: MODEL.mumoe.json), so the GUI's pages and
// the CLI (`mumoe info MODEL --remember` writes the same file) all open it the same way.
#pragma once

#include <QDialog>
#include <QString>

#include "model/state_dict_layout.h"

class QComboBox;
class QLineEdit;
class QSpinBox;

namespace mumoe::ui {

class ModelOptionsDialog : public QDialog {
  Q_OBJECT
 public:
  /// `summaryPreset`: the preset the model opens with now ("" when none), preselected.
  ModelOptionsDialog(const QString& modelPath, const QString& summaryPreset, QWidget* parent = nullptr);

  /// The choices as LayoutOverrides. Throws FileError when the class-name file cannot be read.
  model::LayoutOverrides overrides() const;
  /// True when the user asked to remove the remembered options instead.
  bool forgetRequested() const { return forget_; }

  // The fields, for tests and the screenshot driver.
  QComboBox* presetBox() const { return preset_; }
  QComboBox* activationBox() const { return activation_; }
  QSpinBox* headsBox() const { return heads_; }
  QSpinBox* imageSizeBox() const { return imageSize_; }
  QLineEdit* backboneEdit() const { return backbone_; }
  QLineEdit* classNamesEdit() const { return classNames_; }
  QLineEdit* checkpointKeyEdit() const { return checkpointKey_; }

 private:
  QComboBox* preset_ = nullptr;
  QComboBox* activation_ = nullptr;
  QSpinBox* heads_ = nullptr;
  QSpinBox* imageSize_ = nullptr;
  QLineEdit* backbone_ = nullptr;
  QLineEdit* classNames_ = nullptr;
  QLineEdit* checkpointKey_ = nullptr;
  bool forget_ = false;
};

}  // namespace mumoe::ui
