// SteeringPage offscreen on the demo μMoE GPT with a temporary cache: the model's layers and
// experts fill the pickers, Generate runs on the worker (the GUI thread returns at once), both
// panes fill, they differ for α ≠ 0 and are equal for α = 0 (same seed, same draws).
#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QTextCursor>
#include <QTextDocument>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <QComboBox>

#include "steering_page.h"
#include "text_session_host.h"
#include "token_page.h"
#include "worker_queue.h"
#include "ui_test_registry.h"

using namespace mumoe;

namespace {
QString demoGpt() {
  return QFileInfo(QStringLiteral(MUMOE_DEMO_MODEL_PATH)).dir().filePath(QStringLiteral("gpt-fortunes.mumoe.safetensors"));
}
constexpr int kTimeoutMs = 60'000;
}  // namespace

class SteeringPageTest : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;

  static bool generateAndWait(ui::SteeringPage& page, QString* unsteered, QString* steered) {
    QSignalSpy done(&page, &ui::SteeringPage::generationFinished);
    QSignalSpy failed(&page, &ui::SteeringPage::failed);
    QElapsedTimer t;
    t.start();
    page.generate();
    const auto returnedMs = t.elapsed();
    if (!page.isBusy()) return false;
    // The GUI thread only posts the job (loading the model and extracting take far longer).
    if (returnedMs > 500) qWarning("generate() blocked the GUI thread for %lld ms", static_cast<long long>(returnedMs));
    if (!QTest::qWaitFor([&] { return done.count() > 0 || failed.count() > 0; }, kTimeoutMs)) return false;
    if (failed.count() > 0) {
      qWarning("%s", qPrintable(failed.front().front().toString()));
      return false;
    }
    *unsteered = done.front().at(0).toString();
    *steered = done.front().at(1).toString();
    return !page.isBusy();
  }

 private Q_SLOTS:
  void steersBesideTheUnsteeredText() {
    QVERIFY(dir_.isValid());
    QVERIFY2(QFileInfo::exists(demoGpt()), qPrintable(demoGpt()));
    ui::SteeringPage page;
    page.setCachePath(dir_.filePath(QStringLiteral("analysis.sqlite")));
    page.resize(1000, 600);
    page.show();
    auto* button = page.findChild<QPushButton*>(QStringLiteral("steeringGenerate"));
    QVERIFY(button);
    QVERIFY(!button->isEnabled());  // no model yet

    QSignalSpy loaded(&page, &ui::SteeringPage::modelLoaded);
    page.setModel(demoGpt(), QStringLiteral("fortunes"));
    QVERIFY(loaded.wait(kTimeoutMs));
    QCOMPARE(page.layerCount(), 4);
    QVERIFY(page.expertCount() > 5);
    QVERIFY(button->isEnabled());

    page.setLayer(2);
    page.setExpert(5);
    page.setAlpha(8.0);
    page.setPrompt(QStringLiteral("The "));
    page.setTokenCount(32);
    page.setSeed(1);
    QString unsteered, steered;
    QVERIFY(generateAndWait(page, &unsteered, &steered));
    QVERIFY(unsteered.startsWith(QStringLiteral("The ")));
    QVERIFY(steered.startsWith(QStringLiteral("The ")));
    QVERIFY(unsteered.size() > 4 && steered.size() > 4);
    QCOMPARE(page.unsteeredText(), unsteered);
    QCOMPARE(page.steeredText(), steered);
    QVERIFY2(unsteered != steered, qPrintable(page.statusText()));
    // Where the texts part is marked: the first differing character, in the steered pane's
    // formatting from there on and not before.
    int common = 0;
    while (common < unsteered.size() && common < steered.size() && unsteered[common] == steered[common]) ++common;
    QCOMPARE(page.divergence(), common);
    const auto background = [&](int position) {
      QTextCursor cursor(page.steeredPane()->document());
      cursor.setPosition(position + 1);  // the format of the character before the cursor
      return cursor.charFormat().background().color();
    };
    QVERIFY(background(common) != background(common - 1));
    QCOMPARE(background(static_cast<int>(steered.size()) - 1), background(common));
    QVERIFY(page.statusText().contains(QStringLiteral("expert 5")));
    QVERIFY(button->isEnabled());

    // α = 0: the same seed gives the unsteered text in both panes (session reused, from cache).
    page.setAlpha(0.0);
    QString unsteered0, steered0;
    QVERIFY(generateAndWait(page, &unsteered0, &steered0));
    QCOMPARE(unsteered0, unsteered);
    QCOMPARE(page.divergence(), -1);  // identical: nothing marked
    QCOMPARE(steered0, unsteered0);
    QCOMPARE(page.findChild<QPlainTextEdit*>(QStringLiteral("steeringSteered"))->toPlainText(), unsteered);
  }

  // A model set while a generation runs: the generation is cancelled, its text never appears
  // under the new model, and the page is free at once (the queue's one staleness rule).
  void aNewModelDropsTheGenerationStillRunning() {
    QTemporaryDir cacheDir;
    ui::SteeringPage page;
    page.setCachePath(cacheDir.filePath(QStringLiteral("analysis.sqlite")));  // cold: extraction first
    QSignalSpy loaded(&page, &ui::SteeringPage::modelLoaded);
    page.setModel(demoGpt(), QStringLiteral("fortunes"));
    QVERIFY(loaded.wait(kTimeoutMs));
    QSignalSpy done(&page, &ui::SteeringPage::generationFinished);
    QSignalSpy cancelled(&page, &ui::SteeringPage::cancelled);
    page.setTokenCount(64);
    page.generate();
    QVERIFY(page.isBusy());
    page.setModel(demoGpt(), QStringLiteral("fortunes"));
    QVERIFY(!page.isBusy());
    QSignalSpy progress(page.worker(), &ui::WorkerQueue::progress);
    page.worker()->waitForIdle();
    // The old job stopped during its extraction: it never reached generating a single token.
    for (const auto& report : progress) QVERIFY(report.at(0).toString() != QStringLiteral("Generating"));
    QCOMPARE(done.count(), 0);
    QCOMPARE(cancelled.count(), 0);  // the old job's ending is dropped too: no "cancelled" status
    QCOMPARE(loaded.count(), 2);
    QVERIFY(page.unsteeredText().isEmpty());
    QVERIFY(page.statusText().contains(QStringLiteral("MLP layers")));
    page.setLayer(2);
    page.setExpert(5);
    QString unsteered, steered;
    QVERIFY(generateAndWait(page, &unsteered, &steered));  // the new model generates as usual
  }

  // The Tokens and Steering pages on one host: a layer both show is opened once; a layer change
  // on one page reopens the session for it, and the other page's next job reopens its own (from
  // the cache); opening a layer on the Tokens page does not cancel a steering generation.
  void theTokensAndSteeringPagesShareOneSession() {
    QTemporaryDir cacheDir;
    const QString cache = cacheDir.filePath(QStringLiteral("analysis.sqlite"));
    ui::TextSessionHost host;
    ui::TokenPage tokens(&host);
    tokens.setErrorDialogsEnabled(false);
    ui::SteeringPage steering(&host);
    QCOMPARE(tokens.worker(), host.worker());
    QCOMPARE(steering.worker(), host.worker());
    steering.setCachePath(cache);
    QSignalSpy loaded(&steering, &ui::SteeringPage::modelLoaded);
    steering.setModel(demoGpt(), QStringLiteral("fortunes"));
    QVERIFY(loaded.wait(kTimeoutMs));
    auto* layerCombo = steering.findChild<QComboBox*>(QStringLiteral("steeringLayer"));
    QStringList layers;
    for (int i = 0; i < layerCombo->count(); ++i) layers << layerCombo->itemText(i);
    QCOMPARE(layers.size(), 4);

    QSignalSpy opened(&tokens, &ui::TokenPage::opened);
    QSignalSpy galleries(&tokens, &ui::TokenPage::galleryReady);
    tokens.open(demoGpt(), layers, cache);  // the last layer
    QVERIFY(opened.wait(kTimeoutMs));
    host.worker()->waitForIdle();
    QCOMPARE(host.sessionsOpened(), 1);
    QVERIFY(galleries.count() > 0);

    // Steering the layer the Tokens page shows takes the same session.
    steering.setLayer(3);
    steering.setExpert(5);
    steering.setTokenCount(16);
    QString unsteered, steered;
    QVERIFY(generateAndWait(steering, &unsteered, &steered));
    QCOMPARE(host.sessionsOpened(), 1);

    // Another layer on the Tokens page while a generation runs: the session is reopened for the
    // Tokens page, the generation (another topic) is not cancelled and still delivers.
    QSignalSpy done(&steering, &ui::SteeringPage::generationFinished);
    QSignalSpy stopped(&steering, &ui::SteeringPage::cancelled);
    steering.setTokenCount(48);
    steering.generate();
    QVERIFY(steering.isBusy());
    tokens.layerCombo()->setCurrentIndex(1);
    QVERIFY(opened.wait(kTimeoutMs));
    host.worker()->waitForIdle();
    QCOMPARE(done.count(), 1);
    QCOMPARE(stopped.count(), 0);
    QCOMPARE(host.sessionsOpened(), 2);  // the generation ran before the reopening, on layer 3

    // Each page's next job takes the session of its own layer back.
    QVERIFY(generateAndWait(steering, &unsteered, &steered));
    QCOMPARE(host.sessionsOpened(), 3);
    const int before = galleries.count();
    tokens.selectExpert(0);
    tokens.selectExpert(1);
    host.worker()->waitForIdle();
    QVERIFY(galleries.count() > before);
    QCOMPARE(host.sessionsOpened(), 4);
    QCOMPARE(tokens.galleryModel()->gallery().request.expert, tokens.currentExpert());
  }

  void reportsAnUnreadableModel() {
    ui::SteeringPage page;
    QSignalSpy failed(&page, &ui::SteeringPage::failed);
    page.setModel(dir_.filePath(QStringLiteral("missing.safetensors")), {});
    QVERIFY(failed.wait(kTimeoutMs));
    QCOMPARE(page.layerCount(), 0);
    QVERIFY(page.statusText().startsWith(QStringLiteral("Cannot steer")));
    page.generate();  // nothing to do, nothing crashes
    QVERIFY(!page.isBusy());
  }
};

MUMOE_UI_TEST(SteeringPageTest)
#include "test_steering_page.moc"
