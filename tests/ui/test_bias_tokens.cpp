// The bias page and the token view, offscreen, with a temporary cache and edit-session DB.
// Bias: a small synthetic multi-label head on feature files (tests/editing/biased_features.h)
// opens on the Bias page (no error), λ moves the live metrics (checked against the core's
// BiasSession), an applied edit is on the QUndoStack and in the core stack, undo/redo agree,
// a reopened model restores them, and the export is verified. Tokens: the demo GPT opens on the
// Tokens page, an expert's gallery shows its token highlighted in context, and ablating it
// reports next-token accuracy and loss.
#include <QAbstractItemModelTester>
#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QLineEdit>
#include <QDoubleSpinBox>
#include <QElapsedTimer>
#include <QFile>
#include <QLabel>
#include <QListView>
#include <QListWidget>
#include <QRegularExpression>
#include <QSettings>
#include <QSignalSpy>
#include <QSlider>
#include <QSpinBox>
#include <QTabWidget>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QUndoStack>
#include <QtTest>

#include <memory>

#include "report_text.h"
#include "bias_page.h"
#include "expert_table_model.h"
#include "experts_page.h"
#include "gallery_model.h"
#include "gallery_view.h"
#include "ablation_chart.h"
#include "biased_features.h"
#include "cli_runner.h"
#include "editing/bias_session.h"
#include "main_window.h"
#include "model/classifier_model.h"
#include "reference_math.h"
#include "screenshot_driver.h"
#include "session_controller.h"
#include "steering_page.h"
#include "token_page.h"
#include "demo_paths.h"
#include "ui_test_registry.h"
#include "worker_queue.h"

using namespace mumoe;

namespace {

void saveHead(const std::string& path, uint64_t seed, bool multilabel) {
  nn::LayerConfig c;
  c.input_dim = 8;
  c.output_dim = 2;
  c.expert_dims = {6};
  c.cp_rank = 5;
  nn::MuMoEBlock block(c);
  testkit::randomize(block, seed);
  block->eval();
  model::ClassifierModel::from_layer(block, "head", multilabel ? std::vector<std::string>{"t", "u"}
                                                               : std::vector<std::string>{"a", "b"},
                                     multilabel)
      .save(path, nlohmann::json::object());
}
}  // namespace

class BiasTokensTest : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  QString head_, train_, test_;

  std::unique_ptr<ui::MainWindow> makeWindow() {
    auto w = std::make_unique<ui::MainWindow>(testkit::kDemoModel);
    w->setErrorDialogsEnabled(false);
    w->setCachePath(dir_.filePath(QStringLiteral("analysis.sqlite")));
    w->setBiasDataSpecs(QStringLiteral("features:") + test_, QStringLiteral("features:") + train_);
    w->resize(1400, 860);
    w->show();
    return w;
  }

  /// A window on a new multi-label head written to `head` (seed `seed`), its Bias page on target t
  /// and cell t=1&s=1 (sensitive attribute s), with the edit of λ = 2 applied.
  void openWithOneEdit(const QString& head, uint64_t seed, std::unique_ptr<ui::MainWindow>& window) {
    saveHead(head.toStdString(), seed, true);
    window = makeWindow();
    auto* page = window->biasPage();
    QSignalSpy opened(page, &ui::BiasPage::opened);
    QVERIFY2(window->openModel(head), qPrintable(window->lastError()));
    QVERIFY(opened.wait(20'000));
    page->worker()->waitForIdle();
    page->targetCombo()->setCurrentText(QStringLiteral("t"));
    page->sensitiveCombo()->setCurrentText(QStringLiteral("s"));
    page->worker()->waitForIdle();
    page->cellCombo()->setCurrentText(QStringLiteral("t=1&s=1"));
    page->setLambda(2.0);
    page->worker()->waitForIdle();
    QSignalSpy changed(page, &ui::BiasPage::stackChanged);
    page->applyEdit();
    QVERIFY(changed.wait(5'000));
  }

  /// A bias session of the test's own on the same files: the reference the page is checked against.
  std::unique_ptr<editing::BiasSession> openCoreSession(const QString& sessionDb) const {
    editing::BiasSessionOptions o;
    o.model_path = head_.toStdString();
    o.test_spec = "features:" + test_.toStdString();
    o.train_spec = "features:" + train_.toStdString();
    o.session_db = dir_.filePath(sessionDb).toStdString();
    return editing::BiasSession::open(o);
  }

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    head_ = dir_.filePath(QStringLiteral("head.safetensors"));
    train_ = dir_.filePath(QStringLiteral("train.safetensors"));
    test_ = dir_.filePath(QStringLiteral("test.safetensors"));
    saveHead(head_.toStdString(), 3, true);
    testkit::write_feature_file(train_.toStdString(), testkit::biased_features(600, 0.1, 1, "train"));
    testkit::write_feature_file(test_.toStdString(), testkit::biased_features(400, 1.0, 2, "test"));
  }

  void multiLabelModelOpensOnTheBiasPageWithLiveMetrics() {
    auto window = makeWindow();
    auto* page = window->biasPage();
    QSignalSpy opened(page, &ui::BiasPage::opened);
    QSignalSpy evaluated(page, &ui::BiasPage::evaluated);
    QSignalSpy failed(window.get(), &ui::MainWindow::analysisFailed);
    QVERIFY2(window->openModel(head_), qPrintable(window->lastError()));
    QCOMPARE(window->modelKind(), ui::MainWindow::Kind::MultiLabel);
    QCOMPARE(window->tabs()->currentIndex(), int(ui::MainWindow::Page::Bias));
    QVERIFY(opened.wait(20'000));
    QTRY_VERIFY_WITH_TIMEOUT(evaluated.count() >= 1, 10'000);
    QCOMPARE(failed.count(), 0);  // a multi-label model is not an error
    QCOMPARE(std::fabs(page->proposedLambda()), 6.0);  // λ = N, signed
    QCOMPARE(page->lambdaSpin()->value(), page->proposedLambda());

    // The core's answers for the same task, from a session of our own.
    auto core = openCoreSession(QStringLiteral("core-check.sqlite"));
    // The page starts on the most under-served cell.
    const auto worst = core->worst_cell_task();
    QCOMPARE(page->targetCombo()->currentText().toStdString(), worst.target);
    QCOMPARE(page->sensitiveCombo()->currentText(), QStringLiteral("s"));
    QCOMPARE(page->cellCombo()->currentText().toStdString(), worst.subpopulation.text());
    QCOMPARE(page->evaluation()->task.subpopulation.text(), worst.subpopulation.text());
    // The rest of this test works on t=1 & s=1.
    if (worst.subpopulation.text() != "t=1&s=1") {
      page->targetCombo()->setCurrentText(QStringLiteral("t"));
      page->cellCombo()->setCurrentText(QStringLiteral("t=1&s=1"));
      QTRY_VERIFY_WITH_TIMEOUT(page->evaluation()->task.subpopulation.text() == "t=1&s=1", 5'000);
      page->worker()->waitForIdle();
    }
    const auto task = editing::make_bias_task("t", "t=1&s=1", "");
    const auto plain = core->evaluate(task, {});
    QCOMPARE(editing::to_json(page->evaluation()->before.report), editing::to_json(plain.report));

    // Move λ: the metrics follow.
    evaluated.clear();
    page->lambdaSlider()->setValue(-150);  // λ = −1.5 N
    QTRY_VERIFY_WITH_TIMEOUT(evaluated.count() >= 1 && page->evaluation()->edit.lambda == -9.0, 5'000);
    const auto& e = *page->evaluation();
    const auto expected = core->evaluate(task, {core->propose(task, -9.0)});
    QCOMPARE(editing::to_json(e.after.report), editing::to_json(expected.report));
    QCOMPARE(e.after.test_accuracy, expected.test_accuracy);
    QCOMPARE(page->metricsTable()->item(0, 1)->text(),
             QStringLiteral("%1 %").arg(expected.report.target_subpopulation_accuracy * 100, 0, 'f', 2));
    QCOMPARE(page->cellTable()->rowCount(), 4);
    QVERIFY(page->cellTable()->item(0, 0)->text().contains(QStringLiteral("t=1 & s=1")));
    qInfo("lambda slider: metrics on screen %.1f ms after the move (core %.2f ms, %lld test samples)", e.latencyMs,
          e.coreMs, static_cast<long long>(e.after.report.samples));
    QVERIFY(e.latencyMs < 1000);

    // A free predicate works; a bad one says why and blocks Apply.
    page->cellCombo()->setCurrentText(QStringLiteral("t=1&s=0"));
    QTRY_VERIFY_WITH_TIMEOUT(page->evaluation()->task.subpopulation.text() == "t=1&s=0", 5'000);
    page->cellCombo()->setCurrentText(QStringLiteral("t=1&s=1"));
    QTRY_VERIFY_WITH_TIMEOUT(page->evaluation()->task.subpopulation.text() == "t=1&s=1", 5'000);

    // Blind-threshold comparison column.
    QSignalSpy compared(page, &ui::BiasPage::comparisonReady);
    page->compareBlind();
    QVERIFY(compared.wait(5'000));
    QCOMPARE(page->metricsTable()->columnCount(), 4);

    // Apply, undo, redo: the page's actions, its list and the core stack agree.
    QSignalSpy changed(page, &ui::BiasPage::stackChanged);
    page->setLambda(3.0);
    QTRY_VERIFY_WITH_TIMEOUT(page->evaluation()->edit.lambda == 3.0, 5'000);
    page->applyEdit();
    QVERIFY(changed.wait(5'000));
    QVERIFY(page->undoAction()->isEnabled());
    QVERIFY(!page->redoAction()->isEnabled());
    // A short text that cannot be clipped or lose an "&" to a mnemonic; the edit in the tooltip.
    QCOMPARE(page->undoAction()->text(), QStringLiteral("Undo Edit"));
    QVERIFY2(page->undoAction()->toolTip().contains(QStringLiteral("t +=")), qPrintable(page->undoAction()->toolTip()));
    QVERIFY2(page->undoAction()->toolTip().contains(QStringLiteral("&")), qPrintable(page->undoAction()->toolTip()));
    QCOMPARE(page->coreStack().applied_count(), size_t(1));
    QCOMPARE(page->coreStack().all()[0].lambda, 3.0);
    QCOMPARE(page->editsList()->count(), 1);
    // "Before" now includes the applied edit.
    QTRY_VERIFY_WITH_TIMEOUT(editing::to_json(page->evaluation()->before.report) ==
                                 editing::to_json(core->evaluate(task, {core->propose(task, 3.0)}).report),
                             5'000);
    // λ is proposed afresh for the edited model, not kept at 3 (that "After" would stack it twice).
    QTRY_VERIFY_WITH_TIMEOUT(page->evaluation()->edit.lambda != 3.0, 5'000);
    page->undoAction()->trigger();
    QVERIFY(changed.wait(5'000));
    QVERIFY(!page->undoAction()->isEnabled());
    QVERIFY(page->redoAction()->isEnabled());
    QCOMPARE(page->coreStack().applied_count(), size_t(0));
    QCOMPARE(page->coreStack().all().size(), size_t(1));
    QVERIFY(page->editsList()->item(0)->text().contains(QStringLiteral("undone")));
    page->redoAction()->trigger();
    QVERIFY(changed.wait(5'000));
    QCOMPARE(page->coreStack().applied_count(), size_t(1));

    // Export on the worker; the verification figure is shown.
    QSignalSpy exported(page, &ui::BiasPage::exportFinished);
    editing::ExportRequest r;
    r.output = dir_.filePath(QStringLiteral("edited.safetensors")).toStdString();
    page->exportModel(r);
    QVERIFY(exported.wait(20'000));
    QVERIFY2(exported.first().at(0).toBool(), qPrintable(exported.first().at(1).toString()));
    const QString text = page->exportResultLabel()->text();
    const auto match = QRegularExpression(QStringLiteral("max \\|difference\\| = ([0-9.e+-]+)")).match(text);
    QVERIFY2(match.hasMatch(), qPrintable(text));
    QVERIFY(match.captured(1).toDouble() <= 1e-5);
    QVERIFY(text.contains(QStringLiteral("256 test samples")));
    QVERIFY(QFile::exists(QString::fromStdString(r.output)));
    // Never over the source without overwrite.
    exported.clear();
    r.output = head_.toStdString();
    page->exportModel(r);
    QVERIFY(exported.wait(20'000));
    QVERIFY(!exported.first().at(0).toBool());

    // Reopen: the edit stack comes back from the session database, on both stacks.
    window.reset();
    auto again = makeWindow();
    QSignalSpy reopened(again->biasPage(), &ui::BiasPage::opened);
    QVERIFY(again->openModel(head_));
    QVERIFY(reopened.wait(20'000));
    QCOMPARE(again->biasPage()->coreStack().applied_count(), size_t(1));
    QCOMPARE(again->biasPage()->coreStack().all().size(), size_t(1));
    QVERIFY(again->biasPage()->undoAction()->isEnabled());
    QVERIFY(!again->biasPage()->redoAction()->isEnabled());
    QSignalSpy changedAgain(again->biasPage(), &ui::BiasPage::stackChanged);
    // Ctrl+Z from another page (Edit ▸ Undo Edit, whose tooltip names the edit).
    again->tabs()->setCurrentIndex(int(ui::MainWindow::Page::Model));
    again->activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(again.get()));
    QVERIFY(again->undoEditAction()->isEnabled());
    QCOMPARE(again->undoEditAction()->text(), QStringLiteral("Undo Edit"));
    QVERIFY(again->undoEditAction()->toolTip().contains(QStringLiteral("t +=")));
    QTest::keyClick(again.get(), Qt::Key_Z, Qt::ControlModifier);
    QVERIFY(changedAgain.wait(5'000));
    QCOMPARE(again->biasPage()->coreStack().applied_count(), size_t(0));
    QVERIFY(!again->undoEditAction()->isEnabled());
    QVERIFY(again->redoEditAction()->isEnabled());
    again->biasPage()->worker()->waitForIdle();
  }

  // The same question asked of both front ends — a rewrite of t=1&s=1 at λ = −4 on a model that
  // already has one applied edit — gets the same numbers: the Bias page (edit applied there,
  // saved in the edit session database) and `mumoe rewrite --session` on that database. Both
  // measure MRS against the model with the earlier edit, and say so.
  void theBiasPageAndMumoeRewriteAgreeOnARewriteAfterEarlierEdits() {
    const QString head = dir_.filePath(QStringLiteral("head-cli.safetensors"));  // its own edit stack
    std::unique_ptr<ui::MainWindow> window;
    openWithOneEdit(head, 4, window);
    if (QTest::currentTestFailed()) return;
    auto* page = window->biasPage();
    page->setLambda(-4.0);
    page->worker()->waitForIdle();
    const auto e = *page->evaluation();
    QCOMPARE(e.task.subpopulation.text(), std::string("t=1&s=1"));
    QCOMPARE(e.edit.lambda, -4.0);
    QSignalSpy compared(page, &ui::BiasPage::comparisonReady);
    page->compareBlind();
    QVERIFY(compared.wait(5'000));

    // The CLI on the page's own edit session database and analysis cache.
    const auto run = testkit::run_cli(
        "rewrite " + head.toStdString() + " --data features:" + test_.toStdString() + " --train-data features:" +
        train_.toStdString() + " --target t --subpop 't=1&s=1' --lambda -4 --baselines --oversample-epochs 1 --session " +
        dir_.filePath(QStringLiteral("edits.sqlite")).toStdString() + " --cache " +
        dir_.filePath(QStringLiteral("analysis.sqlite")).toStdString() + " --quiet --json");
    QVERIFY2(run.code == 0, run.out.c_str());
    const auto j = nlohmann::json::parse(run.out);
    QCOMPARE(j["prior_edits"].get<int>(), 1);
    QVERIFY2(j["before"] == editing::to_json(e.before), (j["before"].dump() + "\n" + editing::to_json(e.before).dump()).c_str());
    QVERIFY2(j["after"] == editing::to_json(e.after), (j["after"].dump() + "\n" + editing::to_json(e.after).dump()).c_str());
    QCOMPARE(j["after"]["mrs_reference"].get<std::string>(), std::string("model + 1 edit"));
    QCOMPARE(j["edits"][1]["lambda"].get<double>(), -4.0);
    // The blind-threshold column (MRS row, 4 decimals) is the CLI's baseline.
    const int mrsRow = page->metricsTable()->rowCount() - 1;
    QCOMPARE(page->metricsTable()->horizontalHeaderItem(3)->text(), QStringLiteral("Blind threshold"));
    QCOMPARE(page->metricsTable()->item(mrsRow, 3)->text(),
             QString::number(j["baselines"]["blind threshold"]["mrs"].get<double>(), 'f', 4));
    QCOMPARE(page->metricsTable()->item(mrsRow, 0)->text(), QStringLiteral("—"));  // Before is the reference
    // The per-cell table has the baseline's column too: its cells' accuracies are the CLI's.
    auto* cells = page->cellsTable();
    QCOMPARE(cells->horizontalHeaderItem(5)->text(), QStringLiteral("Blind threshold"));
    for (int row = 0; row < 4; ++row) {
      const int t = row < 2 ? 1 : 0, s = row % 2 == 0 ? 1 : 0;  // rows: t=1&s=1, t=1&s=0, t=0&s=1, t=0&s=0
      double expected = -1;
      for (const auto& c : j["baselines"]["blind threshold"]["cells"])
        if (c["target"] == t && c["sensitive"] == s) expected = c["accuracy"].get<double>();
      QCOMPARE(cells->item(row, 5)->text(), QStringLiteral("%1 %").arg(expected * 100, 0, 'f', 2));
    }
    QCOMPARE(page->metricsTable()->verticalHeaderItem(mrsRow)->text(), QStringLiteral("MRS (vs. Before)"));
    page->worker()->waitForIdle();
  }

  // File ▸ Export Report… on a multi-label model writes its bias table for the page's task and
  // edits: the page `mumoe report MODEL --target … --sensitive … --subpop … --session DB` writes,
  // byte for byte but for the line that says when it was made.
  // A multi-label model also has the Experts and Ablation pages, on the data its Bias page reads
  // (which the data box then shows): per-output accuracy, a gallery filtered by a subpopulation,
  // and per-output ablation equal to the CLI's.
  void aMultiLabelModelHasExpertAndAblationPages() {
    auto window = makeWindow();
    auto* controller = window->controller();
    QSignalSpy opened(controller, &ui::SessionController::sessionOpened);
    QSignalSpy statistics(controller, &ui::SessionController::statisticsReady);
    const QString chosen = window->dataSpec();
    QVERIFY2(window->openModel(head_), qPrintable(window->lastError()));
    QVERIFY(opened.wait(20'000));
    const auto info = controller->info();
    QVERIFY(info.multilabel);
    QCOMPARE(info.classNames, (QStringList{QStringLiteral("t"), QStringLiteral("u")}));
    QCOMPARE(info.dataSpec, QStringLiteral("features:") + test_);
    QCOMPARE(window->dataSpec(), info.dataSpec);  // the box names the data the pages read
    QCOMPARE(window->tabs()->currentIndex(), int(ui::MainWindow::Page::Bias));  // its bias correction first
    window->showPage(ui::MainWindow::Page::Experts);
    QTRY_VERIFY_WITH_TIMEOUT(statistics.count() >= 1, 10'000);
    auto* experts = window->expertsPage();
    QVERIFY(experts->model()->rowCount() > 0);
    QCOMPARE(experts->model()->headerData(ui::ExpertTableModel::TopClasses, Qt::Horizontal).toString(),
             QStringLiteral("Positive outputs"));

    // The gallery of the busiest expert among the samples with t=1 and s=0: each tile is one.
    auto* gallery = experts->gallery();
    QVERIFY(gallery->subpopulationEdit()->isVisibleTo(window.get()));
    int64_t busiest = 0;
    for (const auto& e : experts->model()->statistics().experts)
      if (e.support > experts->model()->statistics().experts[static_cast<size_t>(busiest)].support) busiest = e.expert;
    gallery->setOrder(analysis::GalleryOrder::Top);
    QVERIFY(!gallery->setSubpopulation(QStringLiteral("t=2")));  // refused where it was typed
    QVERIFY(gallery->setSubpopulation(QStringLiteral(" s=0 & t = 1")));
    QCOMPARE(gallery->subpopulationEdit()->text(), QStringLiteral("s=0&t=1"));
    QSignalSpy galleries(controller, &ui::SessionController::galleryReady);
    QVERIFY(experts->selectExpert(busiest));
    QTRY_VERIFY_WITH_TIMEOUT(gallery->model()->rowCount() > 0, 10'000);
    const auto test = testkit::biased_features(400, 1.0, 2, "test");  // the file the window reads
    for (int row = 0; row < gallery->model()->rowCount(); ++row) {
      const auto sample = gallery->model()->index(row).data(ui::GalleryModel::SampleRole).toLongLong();
      QCOMPARE(test.attributes[sample][0].item<int64_t>(), int64_t{1});  // t
      QCOMPARE(test.attributes[sample][1].item<int64_t>(), int64_t{0});  // s
      // The tile names the sample's positive outputs: t, and u where it holds.
      const QString expected = test.attributes[sample][2].item<int64_t>() ? QStringLiteral("t+u") : QStringLiteral("t");
      QCOMPARE(gallery->model()->index(row).data(ui::GalleryModel::LabelNameRole).toString(), expected);
    }

    // Ablating it: one bar per output, the CLI's numbers on the same data and cache.
    QSignalSpy ablated(controller, &ui::SessionController::ablationReady);
    window->ablate({busiest});
    QVERIFY(ablated.wait(10'000));
    QCOMPARE(window->tabs()->currentIndex(), int(ui::MainWindow::Page::Ablation));
    const auto bars = window->ablationChart()->bars();
    QCOMPARE(bars.size(), 2);
    const auto run = testkit::run_cli("ablate " + head_.toStdString() + " --data features:" + test_.toStdString() +
                                      " --experts " + std::to_string(busiest) + " --cache " +
                                      dir_.filePath(QStringLiteral("analysis.sqlite")).toStdString() + " --quiet --json");
    QVERIFY2(run.code == 0, run.out.c_str());
    const auto j = nlohmann::json::parse(run.out);
    const auto& outcome = j["experts"][0];
    for (const auto& [name, change] : bars) {
      const int o = name == QStringLiteral("t") ? 0 : 1;
      const double expected =
          (outcome["per_class_accuracy_after"][o].get<double>() - j["per_class_accuracy_before"][o].get<double>()) * 100;
      QVERIFY2(std::fabs(change - expected) < 1e-9, qPrintable(name));
    }
    QVERIFY(window->ablationChart()->chartView()->chart()->title().contains(QStringLiteral("per-output")));

    // A multi-class model opened next reads the data the user had chosen, not the multi-label
    // model's (nor is that the next start's default).
    QVERIFY2(window->openModel(testkit::kDemoModel), qPrintable(window->lastError()));
    QCOMPARE(window->dataSpec(), chosen);
    QCOMPARE(QSettings().value(QStringLiteral("dataSpec"), chosen).toString(), chosen);
    window->controller()->cancel();
    window->controller()->waitForIdle();
  }

  void theBiasReportIsTheCliReport() {
    // A model of its own (seed 6): edit stacks follow the model's content.
    const QString head = dir_.filePath(QStringLiteral("head-report.safetensors"));
    std::unique_ptr<ui::MainWindow> window;
    openWithOneEdit(head, 6, window);
    if (QTest::currentTestFailed()) return;
    auto* page = window->biasPage();
    page->worker()->waitForIdle();

    const QString windowReport = dir_.filePath(QStringLiteral("bias-window-report.html"));
    QSignalSpy exported(page, &ui::BiasPage::reportExported);
    page->exportReport(windowReport);
    QVERIFY(exported.wait(30'000));
    const QString cliReport = dir_.filePath(QStringLiteral("bias-cli-report.html"));
    const auto run = testkit::run_cli(
        "report " + head.toStdString() + " --data features:" + test_.toStdString() + " --train-data features:" +
        train_.toStdString() + " --target t --sensitive s --subpop 't=1&s=1' --session " +
        dir_.filePath(QStringLiteral("edits.sqlite")).toStdString() + " --cache " +
        dir_.filePath(QStringLiteral("analysis.sqlite")).toStdString() + " --quiet --output " + cliReport.toStdString());
    QVERIFY2(run.code == 0, run.out.c_str());
    const auto withoutDate = testkit::reportWithoutDate;
    const QString a = withoutDate(windowReport);
    QVERIFY(a.contains(QStringLiteral("<table id=\"bias\">")));
    QVERIFY2(a.contains(QStringLiteral("model + 1 edit")),  // the applied edit's column
             qPrintable(a.mid(a.indexOf(QStringLiteral("<table id=\"bias\">")), 300)));
    QVERIFY(a == withoutDate(cliReport));

    // The model itself as the report's path: refused, naming it; the model's bytes stay.
    QFile model(head);
    QVERIFY(model.open(QIODevice::ReadOnly));
    const QByteArray before = model.readAll();
    model.close();
    QSignalSpy failed(page, &ui::BiasPage::failed);
    page->exportReport(head);
    QVERIFY(failed.wait(30'000));
    QVERIFY2(failed.first().at(1).toString().contains(QStringLiteral("the model")), qPrintable(failed.first().at(1).toString()));
    QVERIFY(model.open(QIODevice::ReadOnly));
    QCOMPARE(model.readAll(), before);
    page->worker()->waitForIdle();
  }

  // Bursts of changes faster than the worker answers (λ dragged, the task switched mid-evaluation,
  // apply/undo/redo pressed in a row) must end with what is on screen equal to the core's answer
  // for the final state: the newest λ wins, a proposal never overwrites a λ the user set after
  // it, the proposal follows the task, and the QUndoStack, the core stack and "before" agree.
  void burstsOfChangesEndInTheCoresState() {
    auto window = makeWindow();
    auto* page = window->biasPage();
    QSignalSpy opened(page, &ui::BiasPage::opened);
    QSignalSpy evaluated(page, &ui::BiasPage::evaluated);
    QVERIFY2(window->openModel(head_), qPrintable(window->lastError()));
    QVERIFY(opened.wait(20'000));
    QTRY_VERIFY_WITH_TIMEOUT(evaluated.count() >= 1, 10'000);
    page->worker()->waitForIdle();

    auto core = openCoreSession(QStringLiteral("core-burst.sqlite"));
    page->targetCombo()->setCurrentText(QStringLiteral("t"));  // the cells below are t's
    page->worker()->waitForIdle();
    // The page's screen state against the core, for the page's own applied edits.
    auto expectConsistent = [&](const char* when) {
      page->worker()->waitForIdle();
      QVERIFY2(page->evaluation().has_value(), when);
      const auto& e = *page->evaluation();
      QCOMPARE(e.edit.lambda, page->lambdaSpin()->value());
      auto applied = page->coreStack().applied();
      QCOMPARE(editing::to_json(e.before.report), editing::to_json(core->evaluate(e.task, applied).report));
      applied.push_back(core->propose(e.task, e.edit.lambda));
      QCOMPARE(editing::to_json(e.after.report), editing::to_json(core->evaluate(e.task, applied).report));
      QCOMPARE(page->proposedLambda(), core->propose(e.task).lambda);
      // The actions and the list show the stack.
      const auto& shown = page->coreStack();
      QCOMPARE(page->undoAction()->isEnabled(), shown.can_undo());
      QCOMPARE(page->redoAction()->isEnabled(), shown.can_redo());
      QCOMPARE(page->editsList()->count(), std::max(1, static_cast<int>(shown.all().size())));
    };

    // λ dragged: 25 moves without the event loop running in between.
    evaluated.clear();
    for (int i = 1; i <= 25; ++i) page->setLambda(0.4 * i);  // within ±2N = ±12
    page->worker()->waitForIdle();
    QCOMPARE(page->evaluation()->edit.lambda, 10.0);
    QVERIFY2(evaluated.count() <= 3, qPrintable(QString::number(evaluated.count())));  // coalesced
    expectConsistent("after a drag");

    // The task switched while an evaluation runs, then λ set by hand: the user's λ wins, and the
    // proposal (note, Propose button) is the new task's.
    // (t = 0 cells are proposed a negative λ, t = 1 cells a positive one.)
    page->setLambda(2.0);
    page->cellCombo()->setCurrentText(QStringLiteral("t=0&s=1"));
    page->setLambda(-4.0);
    page->worker()->waitForIdle();
    QCOMPARE(page->evaluation()->task.subpopulation.text(), std::string("t=0&s=1"));
    QVERIFY(page->proposedLambda() < 0);
    QCOMPARE(page->evaluation()->edit.lambda, -4.0);
    expectConsistent("after a task switch with a hand-set λ");
    // Without a hand-set λ the new task's proposal fills the slider.
    page->cellCombo()->setCurrentText(QStringLiteral("t=1&s=1"));
    page->worker()->waitForIdle();
    QCOMPARE(page->lambdaSpin()->value(), page->proposedLambda());
    expectConsistent("after a task switch");

    // Apply / undo / redo / undo / apply in a row, without waiting for the worker.
    const size_t before = page->coreStack().all().size();
    page->setLambda(3.0);
    page->worker()->waitForIdle();
    page->applyEdit();
    page->undoEdit();
    page->redoEdit();
    page->undoEdit();
    page->setLambda(-2.0);
    page->worker()->waitForIdle();
    page->applyEdit();  // replaces the undone edit (a push drops the redo branch)
    page->worker()->waitForIdle();
    QVERIFY(!page->coreStack().can_redo());
    QCOMPARE(page->coreStack().all().back().lambda, -2.0);
    expectConsistent("after apply/undo/redo/undo/apply");
    page->undoEdit();
    expectConsistent("after the last undo");
    QVERIFY(page->coreStack().all().size() >= before);
  }

  void multiClassModelExplainsTheBiasPage() {
    const QString multiclass = dir_.filePath(QStringLiteral("multiclass.safetensors"));
    saveHead(multiclass.toStdString(), 5, false);
    auto window = makeWindow();
    QVERIFY(window->openModel(multiclass));
    QCOMPARE(window->modelKind(), ui::MainWindow::Kind::MultiClass);
    QVERIFY(!window->biasPage()->hasSession());
    window->controller()->cancel();
    window->controller()->waitForIdle();
  }

  // Esc (Analysis ▸ Cancel Job) reaches every page's jobs, steering included: a long generation
  // stops between two tokens, the page is usable again and its panes keep what they showed.
  void escapeCancelsASteeringGeneration() {
    auto window = makeWindow();
    QSignalSpy opened(window->tokenPage(), &ui::TokenPage::opened);
    QVERIFY2(window->openModel(testkit::kDemoGpt), qPrintable(window->lastError()));
    QVERIFY(opened.wait(60'000));
    window->tokenPage()->worker()->waitForIdle();
    // The toolbar's Data box names image data, which a GPT does not read: it is greyed.
    QVERIFY(!window->findChild<QComboBox*>(QStringLiteral("dataSpec"))->isEnabled());
    auto* steering = window->steeringPage();
    QTRY_VERIFY_WITH_TIMEOUT(steering->layerCount() > 0, 10'000);
    window->tabs()->setCurrentIndex(int(ui::MainWindow::Page::Steering));
    window->activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(window.get()));

    // Steering follows the Tokens page: the most loaded expert (it has a centre; expert 0 of the
    // demo GPT is dead) of the block shown there.
    QVERIFY(window->tokenPage()->currentExpert() > 0);
    QCOMPARE(steering->findChild<QSpinBox*>(QStringLiteral("steeringExpert"))->value(),
             static_cast<int>(window->tokenPage()->currentExpert()));
    QCOMPARE(steering->findChild<QComboBox*>(QStringLiteral("steeringLayer"))->currentIndex(),
             window->tokenPage()->layerCombo()->currentIndex());
    steering->setTokenCount(4000);  // 8,000 forward passes: far longer than this test waits
    QSignalSpy progress(steering->worker(), &ui::WorkerQueue::progress);
    QSignalSpy cancelled(steering, &ui::SteeringPage::cancelled);
    QSignalSpy finished(steering, &ui::SteeringPage::generationFinished);
    steering->generate();
    QVERIFY(steering->isBusy());
    // Past the extraction and into the generation, the main window's Cancel is live: press Esc.
    QTRY_VERIFY_WITH_TIMEOUT(!progress.isEmpty() && progress.last().at(0).toString() == QStringLiteral("Generating"),
                             60'000);
    QVERIFY(window->cancelAction()->isEnabled());
    QElapsedTimer clock;
    clock.start();
    QTest::keyClick(window.get(), Qt::Key_Escape);
    QVERIFY(cancelled.wait(5'000));
    qInfo("steering cancelled %lld ms after Esc", static_cast<long long>(clock.elapsed()));
    QCOMPARE(finished.count(), 0);
    QVERIFY(!steering->isBusy());
    QVERIFY(steering->statusText().contains(QStringLiteral("cancelled")));
    QVERIFY(steering->unsteeredText().isEmpty());  // nothing was generated before: nothing shown
    QTRY_VERIFY_WITH_TIMEOUT(!window->cancelAction()->isEnabled(), 5'000);

    // Usable again: a short generation runs to the end.
    steering->setTokenCount(8);
    steering->generate();
    QVERIFY(finished.wait(30'000));
    QVERIFY(steering->unsteeredText().size() > 8);
  }

  void gptOpensOnTheTokenView() {
    auto window = makeWindow();
    auto* page = window->tokenPage();
    QSignalSpy opened(page, &ui::TokenPage::opened);
    QSignalSpy gallery(page, &ui::TokenPage::galleryReady);
    const QString imageData = window->dataSpec();  // what the box showed before
    QVERIFY2(window->openModel(testkit::kDemoGpt), qPrintable(window->lastError()));
    QCOMPARE(window->modelKind(), ui::MainWindow::Kind::Gpt);
    QCOMPARE(window->tabs()->currentIndex(), int(ui::MainWindow::Page::Tokens));
    QVERIFY(opened.wait(60'000));
    // The (greyed) data box names the text the page reads, not an image set.
    QCOMPARE(window->dataSpec(), page->dataIdentity());
    QVERIFY(!page->dataIdentity().isEmpty());
    // A long identity shows its start (the text's name), not its tail.
    QCOMPARE(window->findChild<QComboBox*>(QStringLiteral("dataSpec"))->lineEdit()->cursorPosition(), 0);
    QVERIFY(gallery.wait(10'000));
    QAbstractItemModelTester tester(page->galleryModel(), QAbstractItemModelTester::FailureReportingMode::QtTest);
    QVERIFY(page->layerCombo()->count() >= 1);
    QVERIFY(page->expertTable()->rowCount() > 0);
    const qint64 expert = page->currentExpert();
    QVERIFY(expert >= 0);
    QCOMPARE(page->galleryModel()->gallery().request.expert, expert);
    QVERIFY(page->galleryModel()->rowCount() > 0);
    const QModelIndex first = page->galleryModel()->index(0, 0);
    const QString token = first.data(ui::TokenGalleryModel::TokenRole).toString();
    QVERIFY(!token.isEmpty());
    QCOMPARE(token, QString::fromStdString(page->galleryModel()->gallery().items[0].context.token));
    QVERIFY(first.data(Qt::DisplayRole).toString().contains(QStringLiteral("«") + token + QStringLiteral("»")));
    QVERIFY(page->galleryModel()->gallery().items[0].coefficient >= 0.5);  // random draw among a ≥ 0.5
    // The delegate paints (the highlighted token) without trouble.
    QVERIFY(!page->galleryView()->grab().isNull());

    // Top order, then another expert.
    gallery.clear();
    page->orderCombo()->setCurrentIndex(1);
    QVERIFY(gallery.wait(10'000));
    QCOMPARE(page->galleryModel()->gallery().request.order, analysis::GalleryOrder::Top);

    // Click-to-ablate: accuracy and loss before/after.
    QSignalSpy ablated(page, &ui::TokenPage::ablationReady);
    page->ablate(expert);
    QVERIFY(ablated.wait(30'000));
    const auto* report = page->lastAblation();
    QVERIFY(report);
    QCOMPARE(report->baseline.tokens, qint64(8192));
    QVERIFY(page->ablationLabel()->text().contains(QStringLiteral("next-token accuracy")));
    QVERIFY(page->ablationLabel()->text().contains(QStringLiteral("loss")));

    // File ▸ Export Report… on a GPT: the page `mumoe report` writes for the same block, byte for
    // byte but for the line that says when it was made.
    const QString windowReport = dir_.filePath(QStringLiteral("gpt-window-report.html"));
    QSignalSpy exported(page, &ui::TokenPage::reportExported);
    page->exportReport(windowReport, QStringLiteral("top-2"));
    QVERIFY(exported.wait(120'000));
    QCOMPARE(exported.first().at(1).toInt(), 2);
    const QString cliReport = dir_.filePath(QStringLiteral("gpt-cli-report.html"));
    const auto cli = testkit::run_cli("report " + testkit::kDemoGpt.toStdString() + " --layer " +
                                      page->layerCombo()->currentText().toStdString() + " --cache " +
                                      dir_.filePath(QStringLiteral("cli.sqlite")).toStdString() +
                                      " --experts top-2 --quiet --output " + cliReport.toStdString());
    QCOMPARE(cli.code, 0);
    const auto withoutDate = testkit::reportWithoutDate;
    const QString a = withoutDate(windowReport);
    QVERIFY(a.contains(QStringLiteral("<div class=\"context\">")));
    QVERIFY(a == withoutDate(cliReport));
    page->worker()->waitForIdle();

    // An image model opened next reads the image data the box showed before the GPT.
    QVERIFY2(window->openModel(testkit::kDemoModel), qPrintable(window->lastError()));
    QCOMPARE(window->dataSpec(), imageData);
    window->controller()->cancel();
    window->controller()->waitForIdle();
  }

  void screenshotDriverRendersTheTokenView() {
    auto window = makeWindow();
    const QString out = dir_.filePath(QStringLiteral("tokens.png"));
    ui::ScreenshotDriver driver(window.get(), ui::StudioView::Tokens, out, 60'000);
    QSignalSpy finished(&driver, &ui::ScreenshotDriver::finished);
    driver.start(testkit::kDemoGpt);
    QVERIFY(finished.wait(60'000));
    QCOMPARE(finished.first().first().toInt(), 0);
    QCOMPARE(QImage(out).size(), QSize(1400, 860));
    window->tokenPage()->worker()->waitForIdle();
  }
};

MUMOE_UI_TEST(BiasTokensTest)
#include "test_bias_tokens.moc"
