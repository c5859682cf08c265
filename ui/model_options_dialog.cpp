#include "model_options_dialog.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>

#include "io/errors.h"
#include "model/open_options.h"
#include "nn/backbone_config.h"
#include "nn/layer_config.h"

namespace mumoe::ui {
namespace {

// A line edit with a Browse… button that fills it from a file dialog.
QWidget* fileField(QLineEdit* edit, const QString& caption, const QString& filter, QWidget* parent) {
  auto* row = new QWidget(parent);
  auto* layout = new QHBoxLayout(row);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(edit, 1);
  auto* browse = new QPushButton(QObject::tr("Browse…"), row);
  layout->addWidget(browse);
  QObject::connect(browse, &QPushButton::clicked, row, [edit, caption, filter, parent] {
    const QString path = QFileDialog::getOpenFileName(parent, caption, edit->text(), filter);
    if (!path.isEmpty()) edit->setText(path);
  });
  return row;
}

}  // namespace

ModelOptionsDialog::ModelOptionsDialog(const QString& modelPath, const QString& summaryPreset, QWidget* parent)
    : QDialog(parent) {
  setWindowTitle(tr("Model Options — %1").arg(QFileInfo(modelPath).fileName()));
  auto* layout = new QVBoxLayout(this);
  auto* intro = new QLabel(tr("What the weights of <b>%1</b> cannot say. Saved beside it as <tt>%2</tt>, so "
                              "every page and the command line (<tt>mumoe … %1</tt>) open it the same way.")
                               .arg(QFileInfo(modelPath).fileName().toHtmlEscaped(),
                                    (QFileInfo(modelPath).fileName() + QStringLiteral(".mumoe.json")).toHtmlEscaped()),
                           this);
  intro->setWordWrap(true);
  layout->addWidget(intro);

  auto* form = new QFormLayout;
  preset_ = new QComboBox(this);
  preset_->setObjectName(QStringLiteral("presetBox"));
  preset_->addItem(tr("Automatic (from the weights)"), QString());
  for (const auto& name : nn::backbone_preset_names())
    preset_->addItem(QString::fromStdString(name), QString::fromStdString(name));
  if (const int index = preset_->findData(summaryPreset); index > 0) preset_->setCurrentIndex(index);
  preset_->setToolTip(tr("A ViT's MLP activation and LayerNorm eps, and the eval transform (resize, crop, "
                         "mean/std), as timm builds the named model"));
  form->addRow(tr("Backbone &preset:"), preset_);

  heads_ = new QSpinBox(this);
  heads_->setObjectName(QStringLiteral("headsBox"));
  heads_->setRange(0, 128);
  heads_->setSpecialValueText(tr("Automatic (width / 64)"));
  form->addRow(tr("ViT attention &heads:"), heads_);

  imageSize_ = new QSpinBox(this);
  imageSize_->setObjectName(QStringLiteral("imageSizeBox"));
  imageSize_->setRange(0, 4096);
  imageSize_->setSuffix(tr(" px"));
  imageSize_->setSpecialValueText(tr("Automatic (224 px)"));
  imageSize_->setToolTip(tr("Input size of a ResNet or TorchScript backbone (a ViT's comes from its weights)"));
  form->addRow(tr("&Input size:"), imageSize_);

  backbone_ = new QLineEdit(this);
  backbone_->setObjectName(QStringLiteral("backboneEdit"));
  backbone_->setPlaceholderText(tr("none — or a torch.jit.save'd module: images → features"));
  form->addRow(tr("&TorchScript backbone:"),
               fileField(backbone_, tr("TorchScript backbone"), tr("TorchScript (*.pt *.pth);;All files (*)"), this));

  classNames_ = new QLineEdit(this);
  classNames_->setObjectName(QStringLiteral("classNamesEdit"));
  classNames_->setPlaceholderText(tr("none — one name per line, a JSON list, or imagenet_class_index.json"));
  form->addRow(tr("&Class names:"),
               fileField(classNames_, tr("Class names"), tr("Class names (*.txt *.json);;All files (*)"), this));

  activation_ = new QComboBox(this);
  activation_->setObjectName(QStringLiteral("activationBox"));
  activation_->addItem(tr("Automatic (entmax15)"), QString());
  activation_->addItem(QStringLiteral("entmax15"), QStringLiteral("entmax15"));
  activation_->addItem(QStringLiteral("softmax"), QStringLiteral("softmax"));
  activation_->setToolTip(tr("The μMoE gates' activation, for a plain state dict (it is not in the weights)"));
  form->addRow(tr("&Gate activation:"), activation_);

  checkpointKey_ = new QLineEdit(this);
  checkpointKey_->setObjectName(QStringLiteral("checkpointKeyEdit"));
  checkpointKey_->setPlaceholderText(tr("automatic — or the entry of a checkpoint holding several, e.g. ema"));
  checkpointKey_->setToolTip(tr("Which state dict of a checkpoint such as {\"model\": …, \"ema\": …} to open (--key)"));
  try {  // the state dict chosen before, so that saving other choices keeps it
    if (const auto remembered = model::read_remembered_options(modelPath.toStdString()))
      checkpointKey_->setText(QString::fromStdString(remembered->checkpoint_key));
  } catch (const Error&) {
  }
  form->addRow(tr("State dict &key:"), checkpointKey_);
  layout->addLayout(form);

  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Save | QDialogButtonBox::Cancel, this);
  auto* forget = buttons->addButton(tr("&Forget Saved Options"), QDialogButtonBox::DestructiveRole);
  forget->setObjectName(QStringLiteral("forgetButton"));
  forget->setEnabled(QFileInfo::exists(modelPath + QStringLiteral(".mumoe.json")));
  buttons->button(QDialogButtonBox::Save)->setText(tr("&Save and Reopen"));
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  connect(forget, &QPushButton::clicked, this, [this] {
    forget_ = true;
    accept();
  });
  layout->addWidget(buttons);
  resize(640, sizeHint().height());
}

model::LayoutOverrides ModelOptionsDialog::overrides() const {
  model::LayoutOverrides o;
  o.backbone_preset = preset_->currentData().toString().toStdString();
  o.vit_heads = heads_->value();
  o.image_size = imageSize_->value();
  o.torchscript_backbone = backbone_->text().trimmed().toStdString();
  o.checkpoint_key = checkpointKey_->text().trimmed().toStdString();
  if (const auto names = classNames_->text().trimmed(); !names.isEmpty())
    o.label_names = model::read_class_names(names.toStdString());
  if (const auto activation = activation_->currentData().toString(); !activation.isEmpty())
    o.gate_activation = nn::parse_gate_activation(activation.toStdString());
  return o;
}

}  // namespace mumoe::ui
