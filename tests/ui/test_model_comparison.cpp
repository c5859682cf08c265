// ModelComparisonPage offscreen: three small heads on a feature file the test writes (N = 4 and
// 8 with entmax15, N = 4 with softmax) are swept on the page's worker; the table, the chart's
// lines (one per gate activation, points at N) and the numbers equal a direct AnalysisSession
// sweep of each model.
#include <QChart>
#include <QChartView>
#include <QLineSeries>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>
#include <torch/torch.h>

#include <cmath>

#include "analysis/analysis_session.h"
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

 private Q_SLOTS:
  void sweepsEveryModelAndPlotsMeanPolysemanticityAgainstN() {
    torch::manual_seed(4);
    const auto features = dir_.filePath(QStringLiteral("features.safetensors"));
    io::write_safetensors(features.toStdString(),
                          {{"features", torch::randn({300, 6})}, {"labels", torch::randint(0, 3, {300}, torch::kLong)}},
                          {{"mumoe.class_names", "[\"a\",\"b\",\"c\"]"}});
    const QStringList models = {writeHead(QStringLiteral("n8.safetensors"), 8, nn::GateActivationKind::Entmax15),
                                writeHead(QStringLiteral("n4.safetensors"), 4, nn::GateActivationKind::Entmax15),
                                writeHead(QStringLiteral("s4.safetensors"), 4, nn::GateActivationKind::Softmax)};
    const QString spec = QStringLiteral("features:") + features;
    const QString cache = dir_.filePath(QStringLiteral("cache.sqlite"));

    ui::ModelComparisonPage page;
    page.resize(900, 700);
    page.setData(spec, cache);
    QSignalSpy compared(&page, &ui::ModelComparisonPage::modelCompared);
    page.addModels(models);
    QVERIFY(QTest::qWaitFor([&] { return compared.count() == 3; }, 60'000));

    // Sorted by gate activation, then N.
    const auto& rows = page.models();
    QCOMPARE(rows.size(), 3);
    QCOMPARE(rows[0].experts, 4);
    QCOMPARE(rows[1].experts, 8);
    QCOMPARE(rows[0].activation, rows[1].activation);
    QVERIFY(rows[2].activation != rows[0].activation);
    auto* table = page.findChild<QTableWidget*>();
    QVERIFY(table);
    QCOMPARE(table->rowCount(), 3);

    // Each row equals the core's sweep of that model, computed here directly.
    for (const auto& row : rows) {
      analysis::SessionOptions o;
      o.model_path = row.path.toStdString();
      o.data_spec = spec.toStdString();
      o.cache_path = dir_.filePath(QStringLiteral("direct.sqlite")).toStdString();
      auto session = analysis::AnalysisSession::open(o);
      session->extract();
      const auto sweep = session->sweep(0).value;
      QCOMPARE(row.expertsWithEffect, sweep.experts_with_effect);
      if (std::isnan(sweep.mean_polysemanticity)) QVERIFY(std::isnan(row.meanPolysemanticity));
      else QCOMPARE(row.meanPolysemanticity, sweep.mean_polysemanticity);
      QCOMPARE(row.accuracy, session->accuracy().overall);
    }

    // One line per gate activation, with a point per model that has a defined mean.
    int points = 0, lines = 0;
    for (auto* s : page.chartView()->chart()->series())
      if (auto* line = qobject_cast<QLineSeries*>(s)) {
        ++lines;
        points += line->count();
      }
    int defined = 0;
    for (const auto& row : rows) defined += !std::isnan(row.meanPolysemanticity);
    QCOMPARE(points, defined);
    QVERIFY(lines >= 1 && lines <= 2);

    // The same data again keeps the rows; another data set clears them (they would not compare).
    page.setData(spec, cache);
    QCOMPARE(page.models().size(), 3);
    page.setData(QStringLiteral("fashion-mnist:test"), cache);
    QCOMPARE(page.models().size(), 0);
    QCOMPARE(table->rowCount(), 0);
    page.setData(spec, cache);
    page.addModels({models[0]});
    QVERIFY(QTest::qWaitFor([&] { return compared.count() == 4; }, 60'000));
    page.clear();
    QCOMPARE(page.models().size(), 0);
    QCOMPARE(table->rowCount(), 0);
  }
};

MUMOE_UI_TEST(ModelComparisonTest)
#include "test_model_comparison.moc"
