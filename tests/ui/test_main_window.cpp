// UI tests (offscreen): the layer table model under QAbstractItemModelTester, and the main
// window opening real model files written through the core — and keeping the open model when
// a bad file is opened.
#include <QAbstractItemModelTester>
#include <QComboBox>
#include <QFile>
#include <QLineEdit>
#include <QPushButton>
#include <QStandardPaths>
#include <QTableView>
#include <QTextBrowser>
#include <QtTest>

#include <torch/torch.h>

#include "experts_page.h"
#include "io/safetensors.h"
#include "io/errors.h"
#include "main_window.h"
#include "model_options_dialog.h"
#include "session_controller.h"
#include "model/model_file.h"
#include "model_overview_model.h"
#include "temp_dir.h"
#include "ui_test_registry.h"

using namespace mumoe;

namespace {

nn::LayerConfig config(int64_t experts, int64_t rank, int64_t second_dim = 0) {
  nn::LayerConfig c;
  c.input_dim = 12;
  c.output_dim = 10;
  c.expert_dims = {experts};
  c.cp_rank = rank;
  c.second_dim = second_dim;
  return c;
}

// Writes a model file with the given layers through the core's own writer.
std::string writeModel(const testkit::TempDir& dir, const std::string& name,
                       const std::vector<std::pair<std::string, nn::LayerConfig>>& layers) {
  model::Manifest manifest;
  std::vector<io::NamedTensor> tensors;
  for (const auto& [layerName, c] : layers) {
    model::ModelLayer layer{layerName, layerName + ".", c, false};
    manifest.layers.push_back(layer);
    nn::MuMoEBlock block(c);
    for (auto& t : model::layer_tensors(layer, block)) tensors.push_back(t);
  }
  manifest.label_names = {"t-shirt", "trouser"};
  const auto path = dir.file(name);
  model::save_model_file(path, manifest, tensors);
  return path;
}

}  // namespace

class MainWindowTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void overviewModelPassesTheModelTester() {
    ui::ModelOverviewModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model::ModelSummary summary;
    for (int i = 0; i < 3; ++i)
      summary.layers.push_back({"layer" + std::to_string(i), "", config(8 << i, 4), nn::count_parameters(config(8 << i, 4))});
    model.setSummary(summary);
    QCOMPARE(model.rowCount(), 3);
    QCOMPARE(model.columnCount(), int(ui::ModelOverviewModel::ColumnCount));
    QCOMPARE(model.index(2, ui::ModelOverviewModel::Experts).data().toString(), QStringLiteral("32"));
    QCOMPARE(model.index(2, ui::ModelOverviewModel::Parameters).data(ui::ModelOverviewModel::SortRole).toLongLong(),
             qlonglong(nn::count_parameters(config(32, 4)).total()));
    model.clear();
    QCOMPARE(model.rowCount(), 0);
  }

  void opensAModelFileAndShowsItsLayers() {
    testkit::TempDir dir;
    const auto path = writeModel(dir, "two.safetensors", {{"small", config(16, 4)}, {"large", config(64, 8, 5)}});
    ui::MainWindow window;
    window.setErrorDialogsEnabled(false);
    QSignalSpy opened(&window, &ui::MainWindow::modelOpened);
    QVERIFY2(window.openModel(QString::fromStdString(path)), qPrintable(window.lastError()));
    QCOMPARE(opened.count(), 1);
    QVERIFY(window.windowTitle().contains(QStringLiteral("two.safetensors")));

    auto* table = window.layerTable();
    QCOMPARE(table->model()->rowCount(), 2);
    // Sorting by parameters (descending) puts the two-layer block first.
    table->sortByColumn(ui::ModelOverviewModel::Parameters, Qt::DescendingOrder);
    QCOMPARE(table->model()->index(0, ui::ModelOverviewModel::Name).data().toString(), QStringLiteral("large"));
    QCOMPARE(table->model()->index(0, ui::ModelOverviewModel::Variant).data().toString(), QStringLiteral("CP block"));
    QCOMPARE(table->model()->index(0, ui::ModelOverviewModel::Shape).data().toString(), QStringLiteral("12 → 10 → GELU → 5"));

    table->selectRow(1);
    const QString details = window.detailsView()->toPlainText();
    QVERIFY2(details.contains(QStringLiteral("Layer small")), qPrintable(details));
    QVERIFY(details.contains(QStringLiteral("t-shirt, trouser")));
  }

  void picksAnotherLayerOnTheExpertsPage() {
    // Two alternative heads on the same features: the Experts page offers both and analyses
    // the one picked.
    testkit::TempDir dir;
    model::Manifest manifest;
    std::vector<io::NamedTensor> tensors;
    for (const auto& [name, experts] : std::vector<std::pair<std::string, int64_t>>{{"narrow", 4}, {"wide", 12}}) {
      nn::LayerConfig c;
      c.input_dim = 6;
      c.output_dim = 3;
      c.expert_dims = {experts};
      c.cp_rank = 4;
      model::ModelLayer layer{name, name + ".", c, false};
      manifest.layers.push_back(layer);
      nn::MuMoEBlock block(c);
      for (auto& t : model::layer_tensors(layer, block)) tensors.push_back(t);
    }
    manifest.label_names = {"a", "b", "c"};
    const auto path = dir.file("heads.safetensors");
    model::save_model_file(path, manifest, tensors);
    torch::manual_seed(3);
    const auto features = dir.file("features.safetensors");
    io::write_safetensors(features, {{"features", torch::randn({200, 6})}, {"labels", torch::randint(0, 3, {200}, torch::kLong)}},
                          {{"mumoe.class_names", "[\"a\",\"b\",\"c\"]"}});

    ui::MainWindow window;
    window.setErrorDialogsEnabled(false);
    window.setCachePath(QString::fromStdString(dir.file("cache.sqlite")));
    window.setDataSpec(QStringLiteral("features:") + QString::fromStdString(features));
    QSignalSpy ready(&window, &ui::MainWindow::sessionReady);
    QVERIFY2(window.openModel(QString::fromStdString(path)), qPrintable(window.lastError()));
    QVERIFY(ready.wait(30'000));
    auto* box = window.expertsPage()->layerBox();
    QVERIFY(!box->isHidden());
    QCOMPARE(box->count(), 2);
    const QString first = window.controller()->info().layer;
    QCOMPARE(window.expertsPage()->layer(), first);
    const QString other = first == QLatin1String("narrow") ? QStringLiteral("wide") : QStringLiteral("narrow");

    const int index = box->findData(other);
    QVERIFY(index >= 0);
    box->setCurrentIndex(index);
    Q_EMIT box->activated(index);  // as the user's pick does
    QVERIFY(ready.wait(30'000));
    QCOMPARE(window.controller()->info().layer, other);
    QCOMPARE(window.controller()->info().expertDims.value(0), other == QLatin1String("wide") ? 12 : 4);
    QCOMPARE(window.expertsPage()->layer(), other);
  }

  // A ViT block's μMoE MLP (demo 4b) is analysed by the CLI: choosing it says so and opens
  // nothing (no session runs).
  void aVitBlockLayerPointsToTheCli() {
    testkit::TempDir dir;
    ui::MainWindow window;
    window.setErrorDialogsEnabled(false);
    window.setCachePath(QString::fromStdString(dir.file("cache.sqlite")));
    window.setDataSpec(QStringLiteral("features:") + QString::fromStdString(dir.file("none.safetensors")));
    const auto demo = QStringLiteral(MUMOE_DEMO_VIT_BLOCKS_PATH);
    QVERIFY2(window.openModel(demo), qPrintable(window.lastError()));
    QCOMPARE(window.overviewModel()->summary().layers.size(), size_t{5});
    window.analyzeLayer(QStringLiteral("blocks.2.mlp"));
    QVERIFY2(window.expertsPage()->message().contains(QStringLiteral("mumoe ablate MODEL --layer blocks.2.mlp")),
             qPrintable(window.expertsPage()->message()));
  }

  void aBadFileKeepsTheOpenModelAndNamesTheFile() {
    testkit::TempDir dir;
    const auto good = writeModel(dir, "good.safetensors", {{"head", config(16, 4)}});
    const auto bad = dir.file("broken.safetensors");
    testkit::write_bytes(bad, std::string("\x10\x00\x00\x00\x00\x00\x00\x00{\"a\":", 13));
    ui::MainWindow window;
    window.setErrorDialogsEnabled(false);
    QVERIFY(window.openModel(QString::fromStdString(good)));
    QVERIFY(!window.openModel(QString::fromStdString(bad)));
    QVERIFY2(window.lastError().contains(QStringLiteral("broken.safetensors")), qPrintable(window.lastError()));
    QVERIFY(window.currentModelPath().endsWith(QStringLiteral("good.safetensors")));
    QCOMPARE(window.overviewModel()->rowCount(), 1);
    QVERIFY(!window.openModel(QString::fromStdString(dir.file("missing.safetensors"))));
    QCOMPARE(window.overviewModel()->rowCount(), 1);
  }

  // File ▸ Model Options: a plain state dict's choices (here its gate activation and class
  // names) are saved beside it, reopen it so, and are forgotten again; a mumoe model file has
  // nothing to remember and says so. The dialog turns its fields into the same choices.
  void modelOptionsAreSavedBesideTheModelAndForgotten() {
    testkit::TempDir dir;
    const auto c = config(8, 4);
    const auto plain = dir.file("plain.safetensors");
    {
      nn::MuMoEBlock block(c);
      io::write_safetensors(plain, model::layer_tensors({"head", "head.", c, false}, block), {});
    }
    const auto names = dir.file("names.txt");
    testkit::write_bytes(names, "zero\none\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\n");
    const auto sidecar = QString::fromStdString(plain) + QStringLiteral(".mumoe.json");

    ui::MainWindow window;
    window.setErrorDialogsEnabled(false);
    QVERIFY(window.openModel(QString::fromStdString(plain)));
    QCOMPARE(window.overviewModel()->summary().layers.at(0).config.gate_activation, nn::GateActivationKind::Entmax15);

    ui::ModelOptionsDialog dialog(QString::fromStdString(plain), QString());
    QVERIFY(!dialog.findChild<QPushButton*>(QStringLiteral("forgetButton"))->isEnabled());
    dialog.activationBox()->setCurrentIndex(dialog.activationBox()->findData(QStringLiteral("softmax")));
    dialog.classNamesEdit()->setText(QString::fromStdString(names));
    const auto chosen = dialog.overrides();
    // scripts/screenshots.sh keeps a picture of the dialog (docs/screenshots/model-options.png).
    if (const auto shots = qEnvironmentVariable("MUMOE_SCREENSHOT_DIR"); !shots.isEmpty()) {
      dialog.resize(640, dialog.sizeHint().height());
      QVERIFY(dialog.grab().save(shots + QStringLiteral("/model-options.png")));
    }
    QCOMPARE(chosen.gate_activation, std::optional<nn::GateActivationKind>(nn::GateActivationKind::Softmax));
    QCOMPARE(chosen.label_names.size(), size_t{10});
    QCOMPARE(chosen.backbone_preset, std::string());
    QCOMPARE(chosen.checkpoint_key, std::string());
    dialog.checkpointKeyEdit()->setText(QStringLiteral(" ema "));
    QCOMPARE(dialog.overrides().checkpoint_key, std::string("ema"));
    dialog.checkpointKeyEdit()->clear();

    QVERIFY2(window.applyModelOptions(chosen), qPrintable(window.lastError()));
    QVERIFY(QFile::exists(sidecar));
    const auto& reopened = window.overviewModel()->summary();
    QCOMPARE(reopened.layers.at(0).config.gate_activation, nn::GateActivationKind::Softmax);
    QCOMPARE(reopened.label_names.at(9), std::string("nine"));
    // Any other front end opening the file without choices gets the same configuration.
    QCOMPARE(model::ModelFile::load(plain).manifest().layers.at(0).config.gate_activation,
             nn::GateActivationKind::Softmax);
    ui::ModelOptionsDialog again(QString::fromStdString(plain), QString());
    QVERIFY(again.findChild<QPushButton*>(QStringLiteral("forgetButton"))->isEnabled());

    QVERIFY(window.applyModelOptions({}, /*forget=*/true));
    QVERIFY(!QFile::exists(sidecar));
    QCOMPARE(window.overviewModel()->summary().layers.at(0).config.gate_activation, nn::GateActivationKind::Entmax15);

    // The sidecar may never overwrite one of the inputs (here a "backbone" at its path).
    testkit::write_bytes(sidecar.toStdString(), "not a sidecar");
    model::LayoutOverrides overInput;
    overInput.torchscript_backbone = sidecar.toStdString();
    QVERIFY(!window.applyModelOptions(overInput));
    QVERIFY2(window.lastError().contains(QStringLiteral("TorchScript backbone")), qPrintable(window.lastError()));
    QCOMPARE(testkit::read_bytes(sidecar.toStdString()), std::string("not a sidecar"));
    QFile::remove(sidecar);

    // A mumoe model file opens the same way everywhere already.
    const auto own = writeModel(dir, "own.safetensors", {{"head", c}});
    QVERIFY(window.openModel(QString::fromStdString(own)));
    QVERIFY(!window.applyModelOptions(chosen));
    QVERIFY2(window.lastError().contains(QStringLiteral("own manifest")), qPrintable(window.lastError()));
    QVERIFY(!QFile::exists(QString::fromStdString(own) + QStringLiteral(".mumoe.json")));
    // A class-name file that cannot be read is named.
    dialog.classNamesEdit()->setText(QString::fromStdString(dir.file("missing-names.txt")));
    try {
      dialog.overrides();
      QFAIL("a missing class-name file was not reported");
    } catch (const FileError& e) {
      QVERIFY(QString::fromUtf8(e.what()).contains(QStringLiteral("missing-names.txt")));
    }
    window.controller()->cancel();
    window.controller()->waitForIdle();
  }
};

MUMOE_UI_TEST(MainWindowTest)
#include "test_main_window.moc"
