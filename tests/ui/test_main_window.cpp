// UI tests (offscreen): the layer table model under QAbstractItemModelTester, and the main
// window opening real model files written through the core — and keeping the open model when
// a bad file is opened.
#include <QAbstractItemModelTester>
#include <QComboBox>
#include <QFile>
#include <QLineEdit>
#include <QPushButton>
#include <QSettings>
#include <QStatusBar>
#include <QStandardPaths>
#include <QTableView>
#include <QTextBrowser>
#include <QToolBar>
#include <QtTest>

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "ablation_chart.h"
#include "cli_runner.h"
#include "data/image_data.h"
#include "expert_table_model.h"
#include "experts_page.h"
#include "gallery_model.h"
#include "gallery_view.h"
#include "thumbnail_store.h"
#include "io/safetensors.h"
#include "io/errors.h"
#include "main_window.h"
#include "demo_paths.h"
#include "model_details.h"
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
    model::ModelLayer layer{layerName, layerName + ".", c, false, std::nullopt};
    manifest.layers.push_back(layer);
    nn::MuMoEBlock block(c);
    for (auto& t : model::layer_tensors(layer, block)) tensors.push_back(t);
  }
  manifest.label_names = {"t-shirt", "trouser"};
  const auto path = dir.file(name);
  model::save_model_file(path, manifest, tensors);
  return path;
}

// The first `count` Fashion-MNIST test images as an IDX "test" split in `dir`; returns its spec.
std::string writeFashionMnistIdx(const testkit::TempDir& dir, int64_t count) {
  const auto test = data::load_image_data("fashion-mnist:test");
  auto be32 = [](int64_t v) {
    std::string b(4, '\0');
    for (int i = 0; i < 4; ++i) b[static_cast<size_t>(i)] = static_cast<char>((v >> (24 - 8 * i)) & 0xff);
    return b;
  };
  const auto images = test.images.slice(0, 0, count).contiguous();
  std::string img = std::string("\0\0\x08\x03", 4) + be32(count) + be32(images.size(2)) + be32(images.size(3));
  img.append(static_cast<const char*>(images.data_ptr()), static_cast<size_t>(images.numel()));
  std::string lab = std::string("\0\0\x08\x01", 4) + be32(count);
  for (int64_t i = 0; i < count; ++i) lab += static_cast<char>(test.labels[i].item<int64_t>());
  testkit::write_bytes(dir.file("t10k-images-idx3-ubyte"), img);
  testkit::write_bytes(dir.file("t10k-labels-idx1-ubyte"), lab);
  return "idx:" + dir.path().string() + ":test";
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
      summary.layers.push_back({"layer" + std::to_string(i), "", config(8 << i, 4), nn::count_parameters(config(8 << i, 4)), std::nullopt});
    model.setSummary(summary);
    QCOMPARE(model.rowCount(), 3);
    QCOMPARE(model.columnCount(), int(ui::ModelOverviewModel::ColumnCount));
    QCOMPARE(model.index(2, ui::ModelOverviewModel::Experts).data().toString(), QStringLiteral("32"));
    QCOMPARE(model.index(2, ui::ModelOverviewModel::Parameters).data(ui::ModelOverviewModel::SortRole).toLongLong(),
             qlonglong(nn::count_parameters(config(32, 4)).total()));
    model.clear();
    QCOMPARE(model.rowCount(), 0);
  }

  // Redo answers Ctrl+Shift+Z and Ctrl+Y: each key once on the one action (a key listed twice is
  // an ambiguous shortcut Qt never fires — what users met).
  void redoHasEachShortcutOnce() {
    ui::MainWindow window;
    const auto keys = window.redoEditAction()->shortcuts();
    QVERIFY(keys.contains(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_Z)));
    QVERIFY(keys.contains(QKeySequence(Qt::CTRL | Qt::Key_Y)));
    for (qsizetype i = 0; i < keys.size(); ++i) QCOMPARE(keys.count(keys[i]), 1);
    QVERIFY(!keys.contains(window.undoEditAction()->shortcut()));
  }

  // At 1024 × 640 every toolbar action is on the bar, none folded into its » menu (Export View
  // was); the window does not shrink below a size where the pages can be read.
  void theToolbarFitsASmallWindowWhole() {
    ui::MainWindow window;
    window.resize(1024, 640);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    auto* bar = window.findChild<QToolBar*>(QStringLiteral("mainToolBar"));
    QVERIFY(bar);
    int checked = 0;
    for (auto* action : bar->actions()) {
      if (action->isSeparator()) continue;
      auto* widget = bar->widgetForAction(action);
      QVERIFY(widget);
      QVERIFY2(widget->isVisible(), qPrintable(action->text()));
      ++checked;
    }
    QVERIFY(checked >= 7);
    QVERIFY(window.minimumSize().width() >= 960 && window.minimumSize().height() >= 600);
  }

  // A data SPEC that opened is in the box's list afterwards, and in the next window's.
  void theDataBoxOffersSpecsThatOpened() {
    testkit::TempDir dir;
    const auto spec = QString::fromStdString(writeFashionMnistIdx(dir, 120));
    {
      ui::MainWindow window(testkit::kDemoModel);
      window.setErrorDialogsEnabled(false);
      window.setCachePath(QString::fromStdString(dir.file("analysis.sqlite")));
      QSignalSpy opened(window.controller(), &ui::SessionController::sessionOpened);
      window.setDataSpec(spec);
      QVERIFY2(window.openModel(testkit::kDemoModel), qPrintable(window.lastError()));
      QVERIFY(opened.wait(30'000));
      auto* box = window.findChild<QComboBox*>(QStringLiteral("dataSpec"));
      QVERIFY(box->findText(spec) >= 0);
      window.controller()->waitForIdle();
    }
    ui::MainWindow next;
    QVERIFY(next.findChild<QComboBox*>(QStringLiteral("dataSpec"))->findText(spec) >= 0);
    QCOMPARE(next.dataSpec(), spec);  // and it is the default
    QSettings().clear();  // the folder goes with `dir`: later tests start from the defaults
  }

  // The data box's text matches a listed SPEC that is not its current item (set by the window, as
  // for a multi-label model's data): when its line edit loses focus — a click on a page tab — Qt
  // "activates" that item. That reopened the model and dropped the ablation just asked for.
  void leavingTheDataBoxDoesNotReopenTheModel() {
    testkit::TempDir dir;
    ui::MainWindow window(testkit::kDemoModel);
    window.setErrorDialogsEnabled(false);
    window.setCachePath(QString::fromStdString(dir.file("analysis.sqlite")));
    window.show();
    window.activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(&window));
    QSignalSpy opened(window.controller(), &ui::SessionController::sessionOpened);
    window.setDataSpec(QStringLiteral("biased-fmnist:test"));  // listed third; the box's item stays the first
    QVERIFY2(window.openModel(testkit::kDemoModel), qPrintable(window.lastError()));
    QVERIFY(opened.wait(60'000));
    window.controller()->waitForIdle();
    auto* box = window.findChild<QComboBox*>(QStringLiteral("dataSpec"));
    box->lineEdit()->setFocus(Qt::MouseFocusReason);
    QTRY_VERIFY(box->lineEdit()->hasFocus());
    opened.clear();
    window.showPage(ui::MainWindow::Page::Experts);
    window.expertsPage()->table()->setFocus(Qt::MouseFocusReason);  // focus leaves the box
    QTRY_VERIFY(!box->lineEdit()->hasFocus());
    QVERIFY(!opened.wait(1500));  // no second opening
    QCOMPARE(window.dataSpec(), QStringLiteral("biased-fmnist:test"));
    QSettings().clear();
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
      model::ModelLayer layer{name, name + ".", c, false, std::nullopt};
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

    // Another model without layers to pick: the picker goes (issue 46: it stayed, empty and dead).
    QVERIFY(window.openModel(testkit::kDemoGpt));
    QVERIFY(box->isHidden());
    QCOMPARE(box->count(), 0);
  }

  // A ViT block's μMoE MLP (demo 4b) is analysed by the CLI: choosing it says so and opens
  // nothing (no session runs).
  // A ViT block's μMoE MLP on the Experts and Ablation pages (demo 4b's first block on the first
  // 300 test images): the table has its experts, the gallery outlines each image's strongest
  // patch (a thumbnail per patch, not per image), and an ablation is the CLI's, number for number
  // (both front ends run the core's VitBlockAnalysis; it is checked against PyTorch in
  // tests/core/test_vit_mumoe_blocks.cpp). The demo's MLPs matter little: only removing the
  // whole block's experts changes predictions on so few images, so that is what is compared.
  void aVitBlockLayerIsBrowsedAndAblatedAsInTheCli() {
    testkit::TempDir dir;
    const auto spec = writeFashionMnistIdx(dir, 300);
    ui::MainWindow window;
    window.setErrorDialogsEnabled(false);
    window.setCachePath(QString::fromStdString(dir.file("cache.sqlite")));
    window.setDataSpec(QString::fromStdString(spec));
    const auto demo = QStringLiteral(MUMOE_DEMO_VIT_BLOCKS_PATH);
    QVERIFY2(window.openModel(demo), qPrintable(window.lastError()));
    QCOMPARE(window.overviewModel()->summary().layers.size(), size_t{5});
    QSignalSpy opened(window.controller(), &ui::SessionController::sessionOpened);
    QSignalSpy stats(window.controller(), &ui::SessionController::statisticsReady);
    QSignalSpy failed(window.controller(), &ui::SessionController::jobFailed);
    QVERIFY(!window.analyzeLayer(QStringLiteral("blocks.7.mlp")));
    QVERIFY2(window.lastError().contains(QStringLiteral("blocks.3.mlp")), qPrintable(window.lastError()));
    QVERIFY(window.analyzeLayer(QStringLiteral("blocks.0.mlp")));
    QVERIFY2(opened.wait(120'000), qPrintable(failed.isEmpty() ? QStringLiteral("timeout") : failed.first().at(1).toString()));
    const auto info = window.controller()->info();
    QCOMPARE(info.layer, QStringLiteral("blocks.0.mlp"));
    QCOMPARE(info.samples, qint64{300});
    QVERIFY(info.patchGrid > 0);
    QVERIFY(stats.wait(60'000) || !stats.isEmpty());
    const auto statistics = stats.first().first().value<analysis::ModeStatistics>();
    QCOMPARE(window.expertsPage()->model()->rowCount(), static_cast<int>(info.expertDims.value(0)));
    QCOMPARE(statistics.samples, qint64{300});

    // The busiest expert's gallery: top images, each with its strongest patch outlined.
    qint64 expert = 0;
    for (const auto& e : statistics.experts)
      if (e.support > statistics.experts[static_cast<size_t>(expert)].support) expert = e.expert;
    QSignalSpy galleries(window.controller(), &ui::SessionController::galleryReady);
    window.expertsPage()->gallery()->setOrder(analysis::GalleryOrder::Top);
    QVERIFY(window.expertsPage()->selectExpert(expert));
    QTRY_VERIFY_WITH_TIMEOUT(window.expertsPage()->gallery()->model()->rowCount() > 0, 30'000);
    const auto& gallery = window.expertsPage()->gallery()->model()->gallery();
    QCOMPARE(gallery.request.expert, expert);
    const auto& item = gallery.items.front();
    QVERIFY(item.patch >= 0 && item.patch < info.patchGrid * info.patchGrid);
    auto* store = window.thumbnails();
    const qint64 key = ui::thumbnailKey(item.sample, item.patch);
    QVERIFY(key != item.sample);
    QCOMPARE(ui::thumbnailSource(key), std::make_pair(qint64{item.sample}, qint64{item.patch}));
    (void)store->image(key);
    QTRY_VERIFY_WITH_TIMEOUT(store->contains(key), 30'000);
    const QImage tile = store->image(key).convertToFormat(QImage::Format_RGB888);
    const int side = tile.width() / static_cast<int>(info.patchGrid);
    const int top = static_cast<int>(item.patch / info.patchGrid) * side, left = static_cast<int>(item.patch % info.patchGrid) * side;
    QCOMPARE(tile.pixelColor(left, top), QColor(255, 220, 0));  // the outline's corner
    QCOMPARE(tile.pixelColor(left + side - 1, top + side - 1), QColor(255, 220, 0));

    // Every expert removed together; the outcome is the CLI's.
    QSignalSpy ablations(window.controller(), &ui::SessionController::ablationReady);
    QVector<qint64> all;
    std::string list;
    for (qint64 n = 0; n < info.expertDims.value(0); ++n) {
      all << n;
      list += (n ? "," : "") + std::to_string(n);
    }
    window.ablate(all);
    QVERIFY(ablations.wait(60'000));
    const auto outcome = ablations.first().first().value<analysis::AblationOutcome>();
    QVERIFY(window.ablationChart()->hasOutcome());
    QVERIFY(outcome.changed_predictions > 0);  // else the comparison below could not fail
    const auto cli = testkit::run_cli("ablate " + std::string(MUMOE_DEMO_VIT_BLOCKS_PATH) + " --data " + spec +
                                      " --layer blocks.0.mlp --experts " + list + " --json --quiet");
    QCOMPARE(cli.code, 0);
    const auto j = nlohmann::json::parse(cli.out.substr(cli.out.find('{'))).at("experts").at(0);
    QCOMPARE(outcome.changed_predictions, j.at("changed_predictions").get<int64_t>());
    QCOMPARE(outcome.affected_samples, j.at("affected_samples").get<int64_t>());
    const auto after = j.at("per_class_accuracy_after").get<std::vector<double>>();
    QCOMPARE(outcome.after.per_class.size(), after.size());
    for (size_t c = 0; c < after.size(); ++c) QCOMPARE(outcome.after.per_class[c], after[c]);
    // The CLI's statistics of the block are the page's.
    const auto cliStats = testkit::run_cli("stats " + std::string(MUMOE_DEMO_VIT_BLOCKS_PATH) + " --data " + spec +
                                           " --layer blocks.0.mlp --json --quiet");
    QCOMPARE(cliStats.code, 0);
    const auto js = nlohmann::json::parse(cliStats.out.substr(cliStats.out.find('{')));
    QCOMPARE(js.at("experts").at(static_cast<size_t>(expert)).at("load").get<int64_t>(),
             statistics.experts[static_cast<size_t>(expert)].load);
    QCOMPARE(js.at("mutual_information_bits").get<double>(), statistics.mutual_information_bits);
    window.controller()->cancel();
    window.controller()->waitForIdle();
  }

  // A ViT block's sweep merged from two sweep shards (`ablate --all --shard K/2`, `cache merge`)
  // into the window's cache shows as soon as the block opens, from the cache, without Run Sweep
  // (blocks.1.mlp re-runs two blocks per expert: not a sweep the window would start unasked), and
  // its numbers are the CLI's whole sweep's.
  void aMergedSweepOfABlockShowsAtOnceFromTheCache() {
    testkit::TempDir dir;
    const auto spec = writeFashionMnistIdx(dir, 100);
    const auto model = std::string(MUMOE_DEMO_VIT_BLOCKS_PATH);
    const auto args = model + " --data " + spec + " --layer blocks.1.mlp";
    for (int k = 0; k < 2; ++k)
      QCOMPARE(testkit::run_cli("ablate " + args + " --all --shard " + std::to_string(k) + "/2 --cache " +
                                dir.file("shard-" + std::to_string(k) + ".sqlite") + " --quiet")
                   .code,
               0);
    const auto cache = dir.file("cache.sqlite");
    QCOMPARE(testkit::run_cli("cache merge " + dir.file("shard-0.sqlite") + " " + dir.file("shard-1.sqlite") +
                              " --into " + cache + " --quiet")
                 .code,
             0);
    const auto whole = testkit::run_cli("ablate " + args + " --all --cache " + dir.file("whole.sqlite") + " --json --quiet");
    QCOMPARE(whole.code, 0);
    const auto expected = nlohmann::json::parse(whole.out.substr(whole.out.find('{')));

    ui::MainWindow window;
    window.setErrorDialogsEnabled(false);
    window.setCachePath(QString::fromStdString(cache));
    window.setDataSpec(QString::fromStdString(spec));
    QVERIFY2(window.openModel(QString::fromStdString(model)), qPrintable(window.lastError()));
    QSignalSpy opened(window.controller(), &ui::SessionController::sessionOpened);
    QSignalSpy sweeps(window.controller(), &ui::SessionController::sweepReady);
    QSignalSpy failed(window.controller(), &ui::SessionController::jobFailed);
    QVERIFY(window.analyzeLayer(QStringLiteral("blocks.1.mlp")));
    QVERIFY2(opened.wait(120'000), qPrintable(failed.isEmpty() ? QStringLiteral("timeout") : failed.first().at(1).toString()));
    QVERIFY(window.controller()->info().sweepIsCheap);
    QTRY_VERIFY_WITH_TIMEOUT(!sweeps.isEmpty(), 30'000);
    const auto sweep = sweeps.first().at(0).value<analysis::SweepOutcome>();
    QVERIFY(sweeps.first().at(1).value<ui::AnswerTiming>().fromCache);
    QVERIFY2(window.statusBar()->currentMessage().contains(QStringLiteral("from the cache")),
             qPrintable(window.statusBar()->currentMessage()));  // Run Sweep's feedback too
    QCOMPARE(sweep.experts.size(), expected.at("experts").size());
    QCOMPARE(sweep.experts_with_effect, expected.at("experts_with_effect").get<int64_t>());
    for (size_t n = 0; n < sweep.experts.size(); ++n)
      QCOMPARE(sweep.experts[n].after.per_class,
               expected.at("experts").at(n).at("per_class_accuracy_after").get<std::vector<double>>());
    window.controller()->cancel();
    window.controller()->waitForIdle();
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
      io::write_safetensors(plain, model::layer_tensors({"head", "head.", c, false, std::nullopt}, block), {});
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
    // The file is still the user's own: the Model page's Format says where its configuration is
    // (issue 46: it said "mumoe model file, version 1").
    const auto details = ui::layerDetailsHtml(reopened, 0);
    QVERIFY2(!details.contains(QStringLiteral("mumoe model file")), qPrintable(details));
    QVERIFY2(details.contains(QStringLiteral("plain.safetensors.mumoe.json beside it")), qPrintable(details));
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
