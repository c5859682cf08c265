// MainWindow's data box: which data SPEC the pages read. The user chooses one (the box, the Data
// menu, a dropped folder); a GPT's pages read their own text and a multi-label model's its Bias
// test data, which the box then shows while the user's choice is kept for the next multi-class
// model. SPECs that opened are remembered for the next start.
#include <QComboBox>
#include <QSettings>

#include "main_window.h"
#include "model_comparison_page.h"
#include "session_controller.h"

namespace mumoe::ui {

void MainWindow::setDataSpec(const QString& spec) {
  boxForced_ = false;  // the user's choice, whatever the open model's kind
  if (dataCombo_->currentText() != spec) dataCombo_->setCurrentText(spec);
  // Remembered once a session opened on it (onSessionOpened): a SPEC that fails to load must not
  // become the next start's default and fail again.
  comparison_->setData(dataSpec(), controller_->cachePath());
  if (!currentPath_.isEmpty()) startAnalysis();
}

QString MainWindow::dataSpec() const { return dataCombo_->currentText().trimmed(); }

void MainWindow::rememberDataSpec(const QString& spec) {
  QSettings settings;
  // The next start's default is what the user chose, not the data a model kind forced on the box.
  if (!boxForced_) settings.setValue(kDataSettingsKey, spec);
  // A folder:, celeba:, features: … SPEC that opened is offered again, most recent first.
  QStringList recent = settings.value(kRecentDataKey).toStringList();
  recent.removeAll(spec);
  recent.prepend(spec);
  while (recent.size() > 8) recent.removeLast();
  settings.setValue(kRecentDataKey, recent);
  if (dataCombo_->findText(spec) < 0) dataCombo_->addItem(spec);
}

void MainWindow::setBiasDataSpecs(const QString& testSpec, const QString& trainSpec) {
  biasTestSpec_ = testSpec;
  biasTrainSpec_ = trainSpec;
}

QString MainWindow::multilabelTestSpec() const {
  if (!biasTestSpec_.isEmpty()) return biasTestSpec_;
  // Fashion-MNIST has no attributes: its biased variant is what multi-label models are for.
  const QString chosen = chosenDataSpec();
  return chosen.startsWith(QLatin1String("fashion-mnist")) ? QStringLiteral("biased-fmnist:test") : chosen;
}

void MainWindow::showDataOfKind() {
  // The box shows the data the pages read: a GPT's own text (greyed), a multi-label model's test
  // data; the SPEC the user chose comes back for the next multi-class model.
  const QString forced = kind_ == Kind::Gpt          ? tr("(the GPT's validation text)")
                         : kind_ == Kind::MultiLabel ? multilabelTestSpec()
                                                     : QString();
  if (!forced.isEmpty()) {
    if (!boxForced_ && forced != dataSpec()) {
      imageDataSpec_ = dataSpec();
      boxForced_ = true;
    }
    if (dataSpec() != forced) dataCombo_->setCurrentText(forced);
  } else if (boxForced_) {
    boxForced_ = false;
    dataCombo_->setCurrentText(imageDataSpec_);
  }
  appliedDataSpec_ = dataSpec();
}

}  // namespace mumoe::ui
