// The GUI's one job runner (WorkerQueue) and the one monitor over all of them (JobMonitor): busy
// state across queues (the first queue to finish does not clear it), one cancel for every
// queue, typed per-job endings, stale answers dropped, and the ETA the monitor estimates when a
// job gives none — checked against the arithmetic done by hand.
#include <QAction>
#include <QLabel>
#include <QMessageBox>
#include <QProgressBar>
#include <QSignalSpy>
#include <QtTest>

#include <atomic>
#include <chrono>
#include <thread>

#include "io/errors.h"
#include "job_monitor.h"
#include "job_progress_widget.h"
#include "result_dialog.h"
#include "ui_test_registry.h"
#include "worker_queue.h"

using namespace mumoe;

namespace {

/// A job that runs until cancelled (or 20 s, so a broken cancel fails rather than hangs).
ui::WorkerQueue::Job waitUntilCancelled(std::atomic<bool>& started) {
  return [&started](const std::function<bool()>& cancelled) -> ui::WorkerQueue::Deliver {
    started = true;
    for (int i = 0; i < 2000; ++i) {
      if (cancelled()) throw Cancelled();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return [](double) {};
  };
}

}  // namespace

class JobMonitorTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void etaIsTheRateSinceTheFirstReport() {
    // 10 s for 100 of 1,000 items after the first report at 0: 900 left at 10 items/s.
    QCOMPARE(ui::JobMonitor::estimateEta(10.0, 0, 100, 1000), 90.0);
    // The rate counts from the first report's position, not from zero.
    QCOMPARE(ui::JobMonitor::estimateEta(4.0, 200, 400, 1000), 12.0);
    QVERIFY(ui::JobMonitor::estimateEta(3.0, 0, 0, 1000) < 0);      // nothing done yet
    QVERIFY(ui::JobMonitor::estimateEta(3.0, 0, 1000, 1000) < 0);   // finished
    QVERIFY(ui::JobMonitor::estimateEta(3.0, 0, 5, 0) < 0);         // no total
    QVERIFY(ui::JobMonitor::estimateEta(0.0, 0, 5, 10) < 0);        // no time passed
  }

  void busyHoldsUntilTheLastQueueIsDoneAndCancelReachesEveryQueue() {
    ui::WorkerQueue a, b;
    ui::JobMonitor monitor;
    monitor.track(&a);
    monitor.track(&b);
    QSignalSpy busy(&monitor, &ui::JobMonitor::busyChanged);
    QSignalSpy cancelled(&monitor, &ui::JobMonitor::cancelled);
    std::atomic<bool> startedA{false}, startedB{false};
    bool handlerA = false, handlerB = false;
    ui::WorkerQueue::Handlers ha, hb;
    ha.cancelled = [&] { handlerA = true; };
    hb.cancelled = [&] { handlerB = true; };
    a.submit(QStringLiteral("Job A"), waitUntilCancelled(startedA), true, true, ha);
    b.submit(QStringLiteral("Job B"), waitUntilCancelled(startedB), true, true, hb);
    QCOMPARE(busy.count(), 1);  // one transition to busy, not one per queue
    QVERIFY(monitor.isBusy());
    QTRY_VERIFY(startedA && startedB);

    // A quick job on a third queue that ends while the others run leaves the monitor busy.
    ui::WorkerQueue c;
    monitor.track(&c);
    c.submit(QStringLiteral("Quick"), [](const std::function<bool()>&) -> ui::WorkerQueue::Deliver { return [](double) {}; });
    c.waitForIdle();
    QVERIFY(monitor.isBusy());
    QCOMPARE(busy.count(), 1);

    monitor.cancelAll();
    QTRY_VERIFY_WITH_TIMEOUT(!monitor.isBusy(), 5000);
    QCOMPARE(busy.count(), 2);
    QCOMPARE(busy.last().first().toBool(), false);
    QVERIFY(handlerA && handlerB);  // each job's own handler ran
    QStringList tasks;
    for (const auto& call : cancelled) tasks << call.first().toString();
    tasks.sort();
    QCOMPARE(tasks, (QStringList{QStringLiteral("Job A"), QStringLiteral("Job B")}));
  }

  void progressWithoutAnEtaGetsOneFromTheMonitor() {
    ui::WorkerQueue queue;
    ui::JobMonitor monitor;
    monitor.track(&queue);
    QSignalSpy progress(&monitor, &ui::JobMonitor::progress);
    queue.submit(QStringLiteral("Counting"), [&queue](const std::function<bool()>&) -> ui::WorkerQueue::Deliver {
      queue.postProgress(QStringLiteral("Counting"), 0, 100);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      queue.postProgress(QStringLiteral("Counting"), 50, 100);
      queue.postProgress(QStringLiteral("Counting"), 60, 100, 7.5);  // the job's own ETA wins
      return [](double) {};
    });
    queue.waitForIdle();
    QCOMPARE(progress.count(), 3);
    QVERIFY(progress.at(0).at(3).toDouble() < 0);  // nothing done yet: unknown
    // Half done after ≥ 0.2 s since the first report: about as long again. Read from the
    // monitor's own clock, which started when the first report reached the GUI thread (the
    // three reports may arrive together): so only bounds, not the value.
    const double eta = progress.at(1).at(3).toDouble();
    QVERIFY2(eta >= 0 && eta < 5.0, qPrintable(QString::number(eta)));
    QCOMPARE(progress.at(2).at(3).toDouble(), 7.5);
  }

  void theStatusBarWidgetShowsTheMonitorAndOwnsCancel() {
    ui::WorkerQueue queue;
    ui::JobMonitor monitor;
    monitor.track(&queue);
    QAction cancel(QStringLiteral("Cancel"));
    connect(&cancel, &QAction::triggered, &monitor, &ui::JobMonitor::cancelAll);
    QWidget window;
    auto* widget = new ui::JobProgressWidget(&monitor, &cancel, &window);
    window.show();
    QVERIFY(!cancel.isEnabled());
    QVERIFY(!widget->isVisible());
    std::atomic<bool> started{false};
    queue.submit(QStringLiteral("Long job"), [&queue, &started](const std::function<bool()>& cancelled) -> ui::WorkerQueue::Deliver {
      queue.postProgress(QStringLiteral("Long job"), 25, 100, 90.0);
      started = true;
      while (!cancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      throw Cancelled();
    });
    QVERIFY(cancel.isEnabled());
    QVERIFY(widget->isVisible());
    QTRY_COMPARE(widget->progressBar()->value(), 25);
    QCOMPARE(widget->progressBar()->format(), QStringLiteral("Long job %p%"));
    QCOMPARE(widget->etaLabel()->text(), QStringLiteral("ETA 1 min 30 s"));
    cancel.trigger();
    QTRY_VERIFY_WITH_TIMEOUT(!widget->isVisible(), 5000);
    QVERIFY(!cancel.isEnabled());
  }

  // The bar is wide enough for a long task's name and "100%" (it was clipped at 220 px), and an
  // ETA under a second is not shown ("ETA 0.0 s" at 30 %, with cached chunks counted at once).
  void theProgressTextIsWholeAndASubSecondEtaIsHidden() {
    ui::JobMonitor monitor;
    QAction cancel(QStringLiteral("Cancel"));
    QWidget window;
    auto* widget = new ui::JobProgressWidget(&monitor, &cancel, &window);
    window.show();
    const QString task = QStringLiteral("Computing coefficients of the training split");
    Q_EMIT monitor.progress(task, 30, 100, 0.04);
    QVERIFY(widget->etaLabel()->text().isEmpty());
    QVERIFY(widget->progressBar()->minimumWidth() >=
            widget->progressBar()->fontMetrics().horizontalAdvance(task + QStringLiteral(" 100%")));
    Q_EMIT monitor.progress(task, 40, 100, 12.0);
    QCOMPARE(widget->etaLabel()->text(), QStringLiteral("ETA 12 s"));
  }

  // A result or error dialog opens once the job that reports it has returned (a modal dialog
  // opened inside the answer kept the job busy — bar and Cancel — while it stayed open).
  void aResultDialogOpensAfterTheAnswerReturns() {
    QWidget window;
    window.show();
    ui::showResultDialog(&window, QMessageBox::Warning, QStringLiteral("Title"), QStringLiteral("Text"));
    QVERIFY(window.findChildren<QMessageBox*>().isEmpty());  // not yet: the caller returns first
    QTRY_COMPARE(window.findChildren<QMessageBox*>().size(), 1);
    auto* box = window.findChildren<QMessageBox*>().first();
    QCOMPARE(box->text(), QStringLiteral("Text"));
    box->close();  // deleted on close
    QTRY_VERIFY(window.findChildren<QMessageBox*>().isEmpty());
  }

  void failuresReachTheJobsHandlerAndStaleAnswersAreDropped() {
    ui::WorkerQueue queue;
    ui::JobMonitor monitor;
    monitor.track(&queue);
    QSignalSpy failed(&monitor, &ui::JobMonitor::failed);
    QString seen;
    ui::WorkerQueue::Handlers handlers;
    handlers.failed = [&](const QString& message) { seen = message; };
    queue.submit(
        QStringLiteral("Reading"),
        [](const std::function<bool()>&) -> ui::WorkerQueue::Deliver { throw UsageError("model.pth: truncated"); },
        true, true, handlers);
    queue.waitForIdle();
    QCOMPARE(seen, QStringLiteral("model.pth: truncated"));
    QCOMPARE(failed.count(), 1);
    QCOMPARE(failed.first().at(0).toString(), QStringLiteral("Reading"));

    bool delivered = false;
    queue.submit(QStringLiteral("Old"), [&delivered](const std::function<bool()>&) -> ui::WorkerQueue::Deliver {
      return [&delivered](double) { delivered = true; };
    });
    queue.invalidate();  // a replaced session: its answer must not arrive
    queue.waitForIdle();
    QVERIFY(!delivered);
    QVERIFY(!monitor.isBusy());
  }

  // cancel(topic) stops the running and the queued jobs of that topic and no other; a job
  // submitted afterwards, of any topic, runs.
  void cancellingATopicStopsOnlyItsJobs() {
    ui::WorkerQueue queue;
    QStringList endings;
    auto handlers = [&endings](const QString& name, const QString& topic) {
      ui::WorkerQueue::Handlers h;
      h.topic = topic;
      h.cancelled = [&endings, name] { endings << name + QStringLiteral(" cancelled"); };
      return h;
    };
    auto quick = [&endings](const QString& name) {
      return [&endings, name](const std::function<bool()>&) -> ui::WorkerQueue::Deliver {
        return [&endings, name](double) { endings << name; };
      };
    };
    std::atomic<bool> started{false};
    queue.submit(QStringLiteral("tokens"), waitUntilCancelled(started), true, true,
                 handlers(QStringLiteral("long tokens job"), QStringLiteral("tokens")));
    queue.submit(QStringLiteral("tokens"), quick(QStringLiteral("queued tokens job")), true, true,
                 handlers(QStringLiteral("queued tokens job"), QStringLiteral("tokens")));
    queue.submit(QStringLiteral("steering"), quick(QStringLiteral("steering job")), true, true,
                 handlers(QStringLiteral("steering job"), QStringLiteral("steering")));
    QTRY_VERIFY(started.load());
    queue.cancel(QStringLiteral("tokens"));
    queue.cancel(QString());  // names no topic: cancels nothing
    queue.submit(QStringLiteral("tokens"), quick(QStringLiteral("new tokens job")), true, true,
                 handlers(QStringLiteral("new tokens job"), QStringLiteral("tokens")));
    queue.waitForIdle();
    QCOMPARE(endings, (QStringList{QStringLiteral("long tokens job cancelled"), QStringLiteral("queued tokens job cancelled"),
                                   QStringLiteral("steering job"), QStringLiteral("new tokens job")}));
  }

  // The one staleness rule's topics: invalidate(topic) drops the answers and endings of the jobs
  // submitted under that topic before it, and nothing else; invalidate() drops every topic's.
  void aTopicMakesOnlyItsOwnJobsStale() {
    ui::WorkerQueue queue;
    QStringList answers;
    auto submit = [&](const QString& name, const QString& topic, bool fail = false) {
      ui::WorkerQueue::Handlers handlers;
      handlers.topic = topic;
      handlers.failed = [&answers, name](const QString&) { answers << name + QStringLiteral(" failed"); };
      queue.submit(name, [&answers, name, fail](const std::function<bool()>&) -> ui::WorkerQueue::Deliver {
        if (fail) throw UsageError("no");
        return [&answers, name](double) { answers << name; };
      }, true, true, handlers);
    };
    submit(QStringLiteral("baseline 1"), QStringLiteral("baselines"));
    submit(QStringLiteral("baseline 2"), QStringLiteral("baselines"), /*fail=*/true);
    submit(QStringLiteral("evaluation"), QString());
    submit(QStringLiteral("other"), QStringLiteral("other"));
    queue.invalidate(QStringLiteral("baselines"));  // what the baselines were computed for changed
    submit(QStringLiteral("baseline 3"), QStringLiteral("baselines"));
    queue.waitForIdle();
    QCOMPARE(answers, (QStringList{QStringLiteral("evaluation"), QStringLiteral("other"), QStringLiteral("baseline 3")}));

    answers.clear();
    submit(QStringLiteral("baseline 4"), QStringLiteral("baselines"));
    submit(QStringLiteral("evaluation 2"), QString());
    queue.invalidate();
    submit(QStringLiteral("evaluation 3"), QString());
    queue.waitForIdle();
    QCOMPARE(answers, QStringList{QStringLiteral("evaluation 3")});
    QVERIFY(!queue.isBusy());
  }
};

MUMOE_UI_TEST(JobMonitorTest)
#include "test_job_monitor.moc"
