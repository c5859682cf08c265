// ModelComparisonPage offscreen: four small heads on a feature file the test writes (μMoE N = 4
// and 8 with entmax15, N = 4 with softmax, and a Soft MoE head with N = 4) are swept on the
// page's worker; the table, the chart's lines (one per layer kind, points at N) and the numbers
// equal a direct AnalysisSession sweep of each model, and every row equals the core's
// compare_layer (what `mumoe compare` prints) computed here with a cache of its own.
#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QLineSeries>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>
#include <torch/torch.h>

#include <cmath>

#include "analysis/analysis_session.h"
#include "analysis/layer_comparison.h"
#include "io/safetensors.h"
#include "model/classifier_model.h"
#include "model_comparison_page.h"
#include "reference_math.h"
#include "ui_test_registry.h"

using namespace mumoe;

class ModelComparisonTest : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;

  QString writeHead(const QString& name, int64_t experts, nn::GateActivationKind activation) {
    nn::LayerConfig c;
    c.input_dim = 6;
    c.output_dim = 3;
    c.expert_dims = {experts};
    c.cp_rank = 4;
    c.gate_activation = activation;
    nn::MuMoEBlock block(c);
    testkit::randomize(block, static_cast<uint64_t>(experts) * 7 + (activation == nn::GateActivationKind::Softmax));
    const auto path = dir_.filePath(name);
    model::ClassifierModel::from_layer(block, "head", {"a", "b", "c"}).save(path.toStdString(), {});
    return path;
  }

  QString writeSoftMoEHead(const QString& name) {
    nn::MoELayerConfig c;
    c.router = nn::RouterKind::SoftMoE;
    c.input_dim = 6;
    c.output_dim = 3;
    c.experts = 4;
    c.group_size = 50;
    torch::manual_seed(9);
    nn::MoELayer head(c);
    const auto path = dir_.filePath(name);
    model::ClassifierModel::from_router_layer(head, "head", {"a", "b", "c"}).save(path.toStdString(), {});
    return path;
  }

 private Q_SLOTS:
  void sweepsEveryModelAndPlotsMeanPolysemanticityAgainstN() {
    torch::manual_seed(4);
    const auto features = dir_.filePath(QStringLiteral("features.safetensors"));
    io::write_safetensors(features.toStdString(),
                          {{"features", torch::randn({300, 6})}, {"labels", torch::randint(0, 3, {300}, torch::kLong)}},
                          {{"mumoe.class_names", "[\"a\",\"b\",\"c\"]"}});
    const QStringList models = {writeHead(QStringLiteral("n8.safetensors"), 8, nn::GateActivationKind::Entmax15),
                                writeHead(QStringLiteral("n4.safetensors"), 4, nn::GateActivationKind::Entmax15),
                                writeHead(QStringLiteral("s4.safetensors"), 4, nn::GateActivationKind::Softmax),
                                writeSoftMoEHead(QStringLiteral("soft4.safetensors"))};
    const QString spec = QStringLiteral("features:") + features;
    const QString cache = dir_.filePath(QStringLiteral("cache.sqlite"));

    ui::ModelComparisonPage page;
    page.resize(900, 700);
    page.setData(spec, cache);
    QSignalSpy compared(&page, &ui::ModelComparisonPage::modelCompared);
    page.addModels(models);
    QVERIFY(QTest::qWaitFor([&] { return compared.count() == 4; }, 60'000));

    // Sorted by layer kind ("Soft MoE" < "μMoE CP entmax15" < "μMoE CP softmax"), then N.
    const auto& rows = page.models();
    QCOMPARE(rows.size(), 4);
    QCOMPARE(ui::seriesName(rows[0]), QStringLiteral("Soft MoE"));
    QCOMPARE(ui::seriesName(rows[1]), QStringLiteral("μMoE CP entmax15"));
    QCOMPARE(rows[1].experts, 4);
    QCOMPARE(rows[2].experts, 8);
    QCOMPARE(ui::seriesName(rows[3]), QStringLiteral("μMoE CP softmax"));
    auto* table = page.findChild<QTableWidget*>();
    QVERIFY(table);
    QCOMPARE(table->rowCount(), 4);
    QCOMPARE(table->item(0, 1)->text(), QStringLiteral("Soft MoE"));

    // Each row equals the core's sweep of that model, computed here directly.
    for (const auto& row : rows) {
      analysis::SessionOptions o;
      o.model_path = row.model_path;
      o.data_spec = spec.toStdString();
      o.cache_path = dir_.filePath(QStringLiteral("direct.sqlite")).toStdString();
      auto session = analysis::AnalysisSession::open(o);
      session->extract();
      const auto sweep = session->sweep(0).value;
      QCOMPARE(row.experts_with_effect, sweep.experts_with_effect);
      if (std::isnan(sweep.mean_polysemanticity)) QVERIFY(std::isnan(row.mean_polysemanticity));
      else QCOMPARE(row.mean_polysemanticity, sweep.mean_polysemanticity);
      QCOMPARE(row.accuracy, session->accuracy().overall);
      // The CLI twin's row (its own cache, so computed afresh): the same figures.
      o.cache_path = dir_.filePath(QStringLiteral("cli.sqlite")).toStdString();
      const auto cli = analysis::compare_layer(o);
      QCOMPARE(cli.family, row.family);
      QCOMPARE(cli.parameters, row.parameters);
      QCOMPARE(cli.dead_experts, row.dead_experts);
      QCOMPARE(cli.dropped_tokens, row.dropped_tokens);
      QCOMPARE(cli.mean_class_purity, row.mean_class_purity);
      QCOMPARE(cli.load_cv, row.load_cv);
      QCOMPARE(cli.multiply_adds_per_sample, row.multiply_adds_per_sample);
    }

    // One line per gate activation, with a point per model that has a defined mean.
    int points = 0, lines = 0;
    for (auto* s : page.chartView()->chart()->series())
      if (auto* line = qobject_cast<QLineSeries*>(s)) {
        ++lines;
        points += line->count();
      }
    int defined = 0;
    for (const auto& row : rows) defined += !std::isnan(row.mean_polysemanticity);
    QCOMPARE(points, defined);
    QVERIFY(lines >= 1 && lines <= 3);
    // The chart can plot another figure: class purity is defined for every row.
    auto* metric = page.findChild<QComboBox*>();
    QVERIFY(metric);
    metric->setCurrentIndex(1);
    points = 0;
    for (auto* s : page.chartView()->chart()->series())
      if (auto* line = qobject_cast<QLineSeries*>(s)) points += line->count();
    QCOMPARE(points, 4);
    QVERIFY(page.chartView()->chart()->title().startsWith(QStringLiteral("Class purity")));

    // The same data again keeps the rows; another data set clears them (they would not compare).
    page.setData(spec, cache);
    QCOMPARE(page.models().size(), 4);
    page.setData(QStringLiteral("fashion-mnist:test"), cache);
    QCOMPARE(page.models().size(), 0);
    QCOMPARE(table->rowCount(), 0);
    page.setData(spec, cache);
    page.addModels({models[0]});
    QVERIFY(QTest::qWaitFor([&] { return compared.count() == 5; }, 60'000));
    // Another layer clears the rows too (they would not compare), and reaches the core: these
    // bare heads have no layer "blocks.1.mlp", so nothing is added.
    page.setLayer(QStringLiteral("blocks.1.mlp"));
    QCOMPARE(page.models().size(), 0);
    QCOMPARE(page.layer(), QStringLiteral("blocks.1.mlp"));
    page.clear();
    QCOMPARE(page.models().size(), 0);
    QCOMPARE(table->rowCount(), 0);
  }
};

MUMOE_UI_TEST(ModelComparisonTest)
#include "test_model_comparison.moc"
