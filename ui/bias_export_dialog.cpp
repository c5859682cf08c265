#include "bias_export_dialog.h"

#include <QComboBox>
#include <QDialog>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>

namespace mumoe::ui {

std::optional<editing::ExportRequest> askBiasExport(QWidget* parent, const QString& modelPath,
                                                        std::size_t appliedEdits) {
  QDialog dialog(parent);
  dialog.setWindowTitle(QObject::tr("Export Edited Model"));
  auto* form = new QFormLayout;
  const QFileInfo source(modelPath);
  auto* path = new QLineEdit(source.absolutePath() + QLatin1Char('/') + source.completeBaseName().replace(
                                                                           QStringLiteral(".mumoe"), QString()) +
                             QStringLiteral(".edited.mumoe.safetensors"));
  path->setMinimumWidth(420);
  auto* browse = new QPushButton(QObject::tr("Browse…"));
  auto* pathRow = new QHBoxLayout;
  pathRow->addWidget(path, 1);
  pathRow->addWidget(browse);
  auto* layout = new QComboBox;
  layout->addItem(QObject::tr("automatic (your own layout for a model opened from PyTorch, else mumoe)"), QStringLiteral("auto"));
  layout->addItem(QObject::tr("mumoe model file (keeps the manifest and the edit provenance)"), QStringLiteral("mumoe"));
  layout->addItem(QObject::tr("your own layout (the opened file's keys; .pth or safetensors by the file name)"),
                  QStringLiteral("source"));
  layout->addItem(QObject::tr("reference state_dict (PyTorch load_state_dict keys)"), QStringLiteral("reference"));
  auto* samples = new QSpinBox;
  samples->setRange(1, 100000);
  samples->setValue(256);
  form->addRow(QObject::tr("Output file"), pathRow);
  form->addRow(QObject::tr("Layout"), layout);
  form->addRow(QObject::tr("Verify on"), samples);
  auto* info = new QLabel(QObject::tr("Folds the %n applied edit(s) exactly into the weights, reloads the written file and "
                             "compares it with the live edit on the first test samples before publishing it.",
                             nullptr, static_cast<int>(appliedEdits)));
  info->setWordWrap(true);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
  buttons->button(QDialogButtonBox::Ok)->setText(QObject::tr("Export"));
  auto* v = new QVBoxLayout(&dialog);
  v->addLayout(form);
  v->addWidget(info);
  v->addWidget(buttons);
  QObject::connect(browse, &QPushButton::clicked, &dialog, [&] {
    const QString p = QFileDialog::getSaveFileName(&dialog, QObject::tr("Export Edited Model"), path->text(),
                                                   QObject::tr("Model files (*.safetensors)"), nullptr,
                                                   QFileDialog::DontConfirmOverwrite);
    if (!p.isEmpty()) path->setText(p);
  });
  QObject::connect(buttons, &QDialogButtonBox::accepted, &dialog, &QDialog::accept);
  QObject::connect(buttons, &QDialogButtonBox::rejected, &dialog, &QDialog::reject);
  if (dialog.exec() != QDialog::Accepted || path->text().trimmed().isEmpty()) return std::nullopt;

  editing::ExportRequest request;
  request.output = path->text().trimmed().toStdString();
  request.layout = editing::parse_export_layout(layout->currentData().toString().toStdString());
  request.verify_samples = samples->value();
  const QFileInfo out(path->text().trimmed());
  if (out.exists()) {
    const bool isSource = out.canonicalFilePath() == source.canonicalFilePath();
    const auto answer = QMessageBox::warning(
        parent, QObject::tr("Replace file?"),
        isSource ? QObject::tr("%1 is the model you opened. Replace the SOURCE model with the edited one? The original weights "
                      "will be lost (the edit session stays keyed to the original file's content).")
                       .arg(out.absoluteFilePath())
                 : QObject::tr("%1 exists. Replace it?").arg(out.absoluteFilePath()),
        QMessageBox::Yes | QMessageBox::Cancel, QMessageBox::Cancel);
    if (answer != QMessageBox::Yes) return std::nullopt;
    request.overwrite = true;
  }
  return request;
}

}  // namespace mumoe::ui
