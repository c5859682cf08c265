// mumoe-bench-gui: the desktop app's responsiveness targets (issue 6), measured on the real
// MainWindow (offscreen) driving the real core, with a fresh analysis cache:
//
//   * open:     File ▸ Open of the model → expert table filled (cold: extraction of every
//               test image; reopened: the same from the cache);
//   * ablation: a new single-expert ablation → its bar chart painted, for the K most loaded
//               experts; then the same ablation again (a cached answer);
//   * gallery:  an expert's gallery → thumbnails list filled, new and cached;
//   * scrolling a 10,000-image gallery page by page (the expert's top-ranked samples when it has
//     10,000 with a_n > 0; otherwise — entmax is sparse — every sample of the data set): the time
//               to paint each frame (placeholders for thumbnails not yet fetched), the time until
//               every visible thumbnail is there, and the process's resident memory as it goes;
//   * bias:     (unless --no-bias) the multi-label demo 2 opened on the Bias page — the study
//               computed (cold) and then read from the cache (reopened) — and λ moves: each
//               setLambda → metrics table and chart repainted, with the core's share.
//
//   QT_QPA_PLATFORM=offscreen mumoe-bench-gui [MODEL] [--data SPEC] [--experts K] [--pages P]
//                                             [--bias-model FILE] [--lambda-moves M] [--no-bias]
//
// Prints one JSON object. Timings are wall-clock on the GUI thread, including event delivery.
#include <QAbstractEventDispatcher>
#include <QApplication>
#include <QChartView>
#include <QCommandLineParser>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QListView>
#include <QScrollBar>
#include <QTableView>
#include <QTemporaryDir>
#include <QTimer>

#include <algorithm>
#include <functional>
#include <vector>

#include "ablation_chart.h"
#include "bias_page.h"
#include "expert_table_model.h"
#include "experts_page.h"
#include "gallery_model.h"
#include "gallery_view.h"
#include "io/allocator_tuning.h"
#include "main_window.h"
#include "session_controller.h"
#include "thumbnail_store.h"

namespace {

using mumoe::ui::MainWindow;

/// Runs the event loop until `done()` or `timeoutMs`; false on timeout. The loop sleeps between
/// events, as the application's own does while the user waits: polling (processEvents with a
/// 5 ms limit returns at once when nothing is pending) kept this thread on a core (~85 %) and took
/// it from the work being timed — on 2 cores, a third of the machine (2026-11-26). `done()` is
/// checked after each event (the answers arrive as queued signals), before the loop sleeps, and
/// every 10 ms.
bool waitFor(const std::function<bool()>& done, int timeoutMs = 600'000) {
  QElapsedTimer t;
  t.start();
  QTimer tick;
  tick.start(10);
  // A dispatcher that delivers the queued answers and then blocks (Qt's own, without GLib) would
  // sleep with done() already true until the next tick: wake it instead.
  auto* dispatcher = QAbstractEventDispatcher::instance();
  const auto wake = QObject::connect(dispatcher, &QAbstractEventDispatcher::aboutToBlock, dispatcher, [&] {
    if (done()) dispatcher->wakeUp();
  });
  bool finished = true;
  while (!done()) {
    if (t.elapsed() > timeoutMs) {
      finished = false;
      break;
    }
    QCoreApplication::processEvents(QEventLoop::AllEvents | QEventLoop::WaitForMoreEvents);
  }
  QObject::disconnect(wake);
  return finished;
}

/// Resident set size of this process in MiB (Linux /proc).
double residentMiB() {
  QFile f(QStringLiteral("/proc/self/statm"));
  if (!f.open(QIODevice::ReadOnly)) return -1;
  const auto fields = QString::fromLatin1(f.readAll()).split(QLatin1Char(' '));
  return fields.value(1).toDouble() * 4096.0 / (1024.0 * 1024.0);
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5))];
}

QJsonObject summary(const std::vector<double>& ms) {
  return {{QStringLiteral("n"), static_cast<int>(ms.size())},
          {QStringLiteral("median_ms"), percentile(ms, 0.5)},
          {QStringLiteral("p95_ms"), percentile(ms, 0.95)},
          {QStringLiteral("max_ms"), ms.empty() ? 0.0 : *std::max_element(ms.begin(), ms.end())}};
}

[[noreturn]] void fail(const QString& what) {
  qCritical("mumoe-bench-gui: %s", qPrintable(what));
  std::exit(2);
}

/// The Bias page on a multi-label model: the study opened cold (computed into the analysis cache)
/// and reopened (read back), then λ moves across −N … N, each timed from setLambda to the
/// metrics repainted. `evaluation().coreMs` is the core's share (both metric sets on the worker).
QJsonObject benchBias(const QString& model, const QString& cachePath, int moves) {
  QJsonObject result{{QStringLiteral("model"), model}};
  auto openBias = [&](MainWindow& w) {
    w.setErrorDialogsEnabled(false);
    w.setCachePath(cachePath);
    w.resize(1400, 860);
    w.show();
    bool ready = false;
    QString error;
    auto c1 = QObject::connect(w.biasPage(), &mumoe::ui::BiasPage::evaluated, &w, [&] { ready = true; });
    auto c2 = QObject::connect(w.biasPage(), &mumoe::ui::BiasPage::failed, &w,
                               [&](const QString& task, const QString& m) { error = task + QStringLiteral(": ") + m; });
    QElapsedTimer t;
    t.start();
    if (!w.openModel(model)) fail(w.lastError());
    if (!waitFor([&] { return ready || !error.isEmpty(); })) fail(QStringLiteral("the bias study timed out"));
    if (!error.isEmpty()) fail(error);
    w.biasPage()->repaint();
    const double ms = t.nsecsElapsed() / 1e6;
    QObject::disconnect(c1);
    QObject::disconnect(c2);
    return ms;
  };
  {
    MainWindow cold;
    result[QStringLiteral("open_cold_ms")] = openBias(cold);
  }
  MainWindow w;
  result[QStringLiteral("open_reopened_ms")] = openBias(w);
  auto* page = w.biasPage();
  const int n = page->expertCount();
  std::vector<double> toScreen, core;
  for (int i = 0; i < moves; ++i) {
    // Evenly over −N … N, never the current value (an unchanged λ asks for nothing).
    const double lambda = -n + 2.0 * n * (i + 0.5) / moves;
    bool ready = false;
    auto c = QObject::connect(page, &mumoe::ui::BiasPage::evaluated, &w, [&] { ready = true; });
    QElapsedTimer t;
    t.start();
    page->setLambda(lambda);
    if (!waitFor([&] { return ready; }, 60'000)) fail(QStringLiteral("a λ move was never evaluated"));
    page->repaint();
    toScreen.push_back(t.nsecsElapsed() / 1e6);
    core.push_back(page->evaluation()->coreMs);
    QObject::disconnect(c);
  }
  result[QStringLiteral("experts")] = n;
  result[QStringLiteral("lambda_move_to_screen")] = summary(toScreen);
  result[QStringLiteral("lambda_move_core")] = summary(core);
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  mumoe::io::tune_allocator_for_tensors();  // as the GUI does (app/gui/main.cpp)
  QApplication app(argc, argv);
  QCoreApplication::setOrganizationName(QStringLiteral("mumoe-bench"));  // keeps the user's settings out
  QCoreApplication::setApplicationName(QStringLiteral("mumoe-bench-gui"));
  QCommandLineParser parser;
  parser.addHelpOption();
  parser.addPositionalArgument(QStringLiteral("MODEL"), QStringLiteral("Model (default: the bundled demo)"));
  QCommandLineOption data(QStringLiteral("data"), QStringLiteral("Data SPEC (default fashion-mnist:test)"),
                          QStringLiteral("SPEC"), QStringLiteral("fashion-mnist:test"));
  QCommandLineOption experts(QStringLiteral("experts"), QStringLiteral("New single-expert ablations to time (default 5)"),
                             QStringLiteral("K"), QStringLiteral("5"));
  QCommandLineOption pages(QStringLiteral("pages"), QStringLiteral("Gallery pages to scroll (default: all)"),
                           QStringLiteral("P"), QStringLiteral("0"));
  QCommandLineOption biasModel(QStringLiteral("bias-model"), QStringLiteral("Multi-label model for the Bias page (default: demo 2)"),
                               QStringLiteral("FILE"),
                               QStringLiteral(MUMOE_SOURCE_RESOURCES "/demo/biased-fmnist.mumoe.safetensors"));
  QCommandLineOption lambdaMoves(QStringLiteral("lambda-moves"), QStringLiteral("λ moves to time (default 20)"),
                                 QStringLiteral("M"), QStringLiteral("20"));
  QCommandLineOption noBias(QStringLiteral("no-bias"), QStringLiteral("Skip the Bias page (its cold study takes about a minute)"));
  parser.addOptions({data, experts, pages, biasModel, lambdaMoves, noBias});
  parser.process(app);
  const QString model =
      parser.positionalArguments().value(0, QStringLiteral(MUMOE_SOURCE_RESOURCES "/demo/demo.mumoe.safetensors"));

  QTemporaryDir dir;
  auto window = std::make_unique<MainWindow>();
  auto openWindow = [&](MainWindow& w) {
    w.setErrorDialogsEnabled(false);
    w.setCachePath(dir.filePath(QStringLiteral("analysis.sqlite")));
    w.setDataSpec(parser.value(data));
    w.resize(1400, 860);
    w.show();
  };
  openWindow(*window);
  QJsonObject out{{QStringLiteral("model"), model}, {QStringLiteral("data"), parser.value(data)}};
  const double rssStart = residentMiB();

  // Open (cold) → expert table filled.
  auto timeOpen = [&](MainWindow& w) {
    bool ready = false;
    QString error;
    auto c1 = QObject::connect(w.controller(), &mumoe::ui::SessionController::statisticsReady, &w, [&] { ready = true; });
    auto c2 = QObject::connect(&w, &MainWindow::analysisFailed, &w, [&](const QString& m) { error = m; });
    QElapsedTimer t;
    t.start();
    if (!w.openModel(model)) fail(w.lastError());
    if (!waitFor([&] { return ready || !error.isEmpty(); })) fail(QStringLiteral("open timed out"));
    if (!error.isEmpty()) fail(error);
    w.expertsPage()->table()->viewport()->repaint();
    const double ms = t.nsecsElapsed() / 1e6;
    QObject::disconnect(c1);
    QObject::disconnect(c2);
    return ms;
  };
  out[QStringLiteral("open_cold_ms")] = timeOpen(*window);

  // The K most loaded experts.
  std::vector<std::pair<qint64, qint64>> byLoad;
  for (const auto& e : window->expertsPage()->model()->statistics().experts) byLoad.emplace_back(e.load, e.expert);
  std::sort(byLoad.rbegin(), byLoad.rend());
  const auto k = std::min<size_t>(static_cast<size_t>(std::max(1, parser.value(experts).toInt())), byLoad.size());

  auto timeAblation = [&](qint64 expert, bool* fromCache) {
    bool ready = false;
    auto c = QObject::connect(window->controller(), &mumoe::ui::SessionController::ablationReady, window.get(),
                              [&](const mumoe::analysis::AblationOutcome&, const mumoe::ui::AnswerTiming& timing) {
                                ready = true;
                                *fromCache = timing.fromCache;
                              });
    QElapsedTimer t;
    t.start();
    window->ablate({expert});
    if (!waitFor([&] { return ready; })) fail(QStringLiteral("ablation timed out"));
    window->ablationChart()->chartView()->viewport()->repaint();
    const double ms = t.nsecsElapsed() / 1e6;
    QObject::disconnect(c);
    return ms;
  };
  std::vector<double> fresh, cached;
  for (size_t i = 0; i < k; ++i) {
    bool fromCache = true;
    fresh.push_back(timeAblation(byLoad[i].second, &fromCache));
    if (fromCache) fail(QStringLiteral("a first ablation came from the cache"));
  }
  for (size_t i = 0; i < k; ++i) {
    bool fromCache = false;
    cached.push_back(timeAblation(byLoad[i].second, &fromCache));
    if (!fromCache) fail(QStringLiteral("a repeated ablation was recomputed"));
  }
  out[QStringLiteral("ablation_new")] = summary(fresh);
  out[QStringLiteral("ablation_cached")] = summary(cached);

  // Galleries: select an expert → its thumbnails list filled (new, then cached on reselection).
  window->showPage(MainWindow::Page::Experts);
  auto* gallery = window->expertsPage()->gallery();
  auto timeGallery = [&](qint64 expert) {
    bool ready = false;
    bool fromCache = false;
    auto c = QObject::connect(window->controller(), &mumoe::ui::SessionController::galleryReady, window.get(),
                              [&](const mumoe::analysis::Gallery&, const mumoe::ui::AnswerTiming& timing) {
                                ready = true;
                                fromCache = timing.fromCache;
                              });
    QElapsedTimer t;
    t.start();
    if (!window->expertsPage()->selectExpert(expert)) fail(QStringLiteral("cannot select expert %1").arg(expert));
    if (!waitFor([&] { return ready; })) fail(QStringLiteral("gallery timed out"));
    gallery->listView()->viewport()->repaint();
    const double ms = t.nsecsElapsed() / 1e6;
    QObject::disconnect(c);
    return std::make_pair(ms, fromCache);
  };
  std::vector<double> galleryNew, galleryCached;
  for (size_t i = 0; i < k; ++i) galleryNew.push_back(timeGallery(byLoad[i].second).first);
  for (size_t i = 0; k > 1 && i < k; ++i) {
    const auto [ms, fromCache] = timeGallery(byLoad[(i + 1) % k].second);  // a change of expert each time
    if (!fromCache) fail(QStringLiteral("a repeated gallery was recomputed"));
    galleryCached.push_back(ms);
  }
  out[QStringLiteral("gallery_new")] = summary(galleryNew);
  out[QStringLiteral("gallery_cached")] = summary(galleryCached);

  // A 10,000-image gallery, scrolled page by page.
  bool bigReady = false;
  // Wait for the answer to the 10,000-sample request itself: changing the order first asks for
  // (and gets) a gallery of the old count.
  auto c = QObject::connect(window->controller(), &mumoe::ui::SessionController::galleryReady, window.get(),
                            [&](const mumoe::analysis::Gallery& g) { bigReady = bigReady || g.request.count == 10'000; });
  gallery->setOrder(mumoe::analysis::GalleryOrder::Top);
  gallery->setCount(10'000);
  if (!waitFor([&] { return bigReady; }, 60'000)) fail(QStringLiteral("the top-10,000 gallery did not come"));
  QObject::disconnect(c);
  const int realRows = gallery->model()->rowCount();
  if (realRows < 10'000) {
    // Entmax is sparse: no expert of the demo has 10,000 samples with a_n > 0. The scrolling
    // test then shows every sample of the data set (the first 10,000) in this gallery, with
    // their real images through the real fetch path; only the rows are not an expert's choice.
    mumoe::analysis::Gallery all;
    all.request = gallery->request();
    all.eligible = 10'000;
    for (int64_t i = 0; i < 10'000; ++i) all.items.push_back({i, 0, 0, 1.0});
    gallery->setGallery(all, window->controller()->info().classNames, mumoe::ui::AnswerTiming{});
    if (gallery->model()->rowCount() != 10'000) fail(QStringLiteral("the 10,000-row gallery was not shown"));
  }
  auto* list = gallery->listView();
  auto* bar = list->verticalScrollBar();
  auto* store = window->thumbnails();
  list->viewport()->repaint();
  waitFor([&] { return store->pendingCount() == 0; });
  std::vector<double> frameMs, filledMs;
  double rssMax = residentMiB();
  const double rssBeforeScroll = rssMax;
  int steps = 0;
  const int maxPages = parser.value(pages).toInt();
  for (int v = bar->minimum(); v <= bar->maximum(); v += bar->pageStep()) {
    if (maxPages > 0 && steps >= maxPages) break;
    QElapsedTimer t;
    t.start();
    bar->setValue(v);
    list->viewport()->repaint();  // synchronous: placeholders where thumbnails are not yet there
    frameMs.push_back(t.nsecsElapsed() / 1e6);
    if (!waitFor([&] { return store->pendingCount() == 0; }, 60'000)) fail(QStringLiteral("thumbnails never came"));
    list->viewport()->repaint();
    filledMs.push_back(t.nsecsElapsed() / 1e6);
    rssMax = std::max(rssMax, residentMiB());
    ++steps;
  }
  QJsonObject scroll{{QStringLiteral("rows"), gallery->model()->rowCount()},
                     {QStringLiteral("largest_real_gallery_rows"), realRows},
                     {QStringLiteral("pages_scrolled"), steps},
                     {QStringLiteral("frame"), summary(frameMs)},
                     {QStringLiteral("page_filled"), summary(filledMs)},
                     {QStringLiteral("source_images_kib"), store->sourceKiB()},
                     {QStringLiteral("rss_before_mib"), rssBeforeScroll},
                     {QStringLiteral("rss_max_mib"), rssMax},
                     {QStringLiteral("rss_after_mib"), residentMiB()}};
  out[QStringLiteral("gallery_scroll")] = scroll;

  // Reopened: a new window on the same cache.
  window.reset();
  auto reopened = std::make_unique<MainWindow>();
  openWindow(*reopened);
  out[QStringLiteral("open_reopened_ms")] = timeOpen(*reopened);
  reopened.reset();

  if (!parser.isSet(noBias)) out[QStringLiteral("bias")] = benchBias(parser.value(biasModel), dir.filePath(QStringLiteral("analysis.sqlite")),
                                                               std::max(1, parser.value(lambdaMoves).toInt()));
  out[QStringLiteral("rss_start_mib")] = rssStart;
  out[QStringLiteral("rss_end_mib")] = residentMiB();

  std::fputs(QJsonDocument(out).toJson(QJsonDocument::Indented).constData(), stdout);
  return 0;
}
