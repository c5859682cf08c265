#include "screenshot_driver.h"

#include <QListView>
#include <QPixmap>
#include <QTableView>

#include "ablation_chart.h"
#include "bias_page.h"
#include "token_page.h"
#include "worker_queue.h"
#include "expert_table_model.h"
#include "experts_page.h"
#include "gallery_model.h"
#include "gallery_view.h"
#include "main_window.h"
#include "model_comparison_page.h"
#include "sample_detail.h"
#include "steering_page.h"
#include "session_controller.h"
#include "sweep_chart.h"
#include "thumbnail_store.h"

namespace mumoe::ui {

std::optional<StudioView> parseStudioView(const QString& name) {
  const QString n = name.trimmed().toLower();
  if (n == QLatin1String("model") || n == QLatin1String("overview")) return StudioView::Model;
  if (n == QLatin1String("gallery") || n == QLatin1String("experts")) return StudioView::Gallery;
  if (n == QLatin1String("ablation")) return StudioView::Ablation;
  if (n == QLatin1String("bias")) return StudioView::Bias;
  if (n == QLatin1String("tokens")) return StudioView::Tokens;
  if (n == QLatin1String("steering")) return StudioView::Steering;
  if (n == QLatin1String("compare")) return StudioView::Compare;
  return std::nullopt;
}

bool studioViewAvailable(StudioView) { return true; }

ScreenshotDriver::ScreenshotDriver(MainWindow* window, StudioView view, QString outputPath, int timeoutMs, QObject* parent)
    : QObject(parent), window_(window), view_(view), output_(std::move(outputPath)) {
  poll_.setInterval(100);
  connect(&poll_, &QTimer::timeout, this, &ScreenshotDriver::poll);
  timeout_.setSingleShot(true);
  timeout_.setInterval(timeoutMs);
  connect(&timeout_, &QTimer::timeout, this,
          [this] { finish(2, tr("timed out after %1 s waiting for the view's data").arg(timeout_.interval() / 1000)); });
}

namespace {
// The window's page that shows `view`.
MainWindow::Page pageOf(StudioView view) {
  switch (view) {
    case StudioView::Model: return MainWindow::Page::Model;
    case StudioView::Gallery: return MainWindow::Page::Experts;
    case StudioView::Bias: return MainWindow::Page::Bias;
    case StudioView::Tokens: return MainWindow::Page::Tokens;
    case StudioView::Steering: return MainWindow::Page::Steering;
    case StudioView::Compare: return MainWindow::Page::Compare;
    case StudioView::Ablation: break;
  }
  return MainWindow::Page::Ablation;
}
}  // namespace

void ScreenshotDriver::start(const QString& modelPath, const QStringList& compared, const QString& layer) {
  compared_ = compared.isEmpty() ? QStringList{modelPath} : compared;
  comparedLayer_ = layer;
  if (!studioViewAvailable(view_)) {
    QTimer::singleShot(0, this, [this] {
      finish(3, tr("the %1 view is not yet available").arg(view_ == StudioView::Bias ? QStringLiteral("bias")
                                                                                        : QStringLiteral("tokens")));
    });
    return;
  }
  auto* c = window_->controller();
  connect(window_, &MainWindow::analysisFailed, this, [this](const QString& m) { finish(2, m); });
  connect(c, &SessionController::statisticsReady, this, [this] { onStatistics(); });
  connect(c, &SessionController::sweepReady, this, [this] { sweepSeen_ = true; });
  connect(c, &SessionController::ablationReady, this, [this] { ablationSeen_ = true; });
  connect(c, &SessionController::galleryReady, this, [this] {
    // Show one sample enlarged with its coefficient vector.
    auto* list = window_->expertsPage()->gallery()->listView();
    if (list->model()->rowCount() > 0 && !list->currentIndex().isValid())
      list->setCurrentIndex(list->model()->index(0, 0));
  });
  connect(c, &SessionController::jobFailed, this,
          [this](const QString& task, const QString& m) { finish(2, tr("%1: %2").arg(task, m)); });
  // Bias: the proposed edit's metrics with the blind-threshold baseline beside them.
  connect(window_->biasPage(), &BiasPage::evaluated, this, [this] {
    if (view_ != StudioView::Bias || biasCompared_) return;
    biasCompared_ = true;
    window_->biasPage()->compareBlind();
  });
  connect(window_->biasPage(), &BiasPage::comparisonReady, this, [this] { comparisonSeen_ = true; });
  // Tokens: the most loaded expert's gallery, then that expert ablated. Steering: once the Tokens
  // page shows its most loaded expert (the Steering page follows it), both generations, on the
  // session the two pages share.
  connect(window_->tokenPage(), &TokenPage::galleryReady, this, [this] {
    if (view_ == StudioView::Steering && !steered_ && window_->steeringPage()->layerCount() > 0) {
      steered_ = true;
      window_->steeringPage()->setTokenCount(160);
      window_->steeringPage()->generate();
      return;
    }
    if (view_ != StudioView::Tokens || tokenAblated_) return;
    tokenAblated_ = true;
    auto* page = window_->tokenPage();
    page->galleryView()->setCurrentIndex(page->galleryModel()->index(0, 0));
    page->ablate(page->currentExpert());
  });
  connect(window_->tokenPage(), &TokenPage::ablationReady, this, [this] { ablationSeen_ = true; });
  connect(window_->steeringPage(), &SteeringPage::generationFinished, this, [this] { generationSeen_ = true; });
  connect(window_->steeringPage(), &SteeringPage::failed, this, [this](const QString& m) { finish(2, m); });
  connect(window_->comparisonPage(), &ModelComparisonPage::modelCompared, this, [this] { ++comparedSeen_; });
  clock_.start();
  timeout_.start();
  window_->showPage(pageOf(view_));
  if (!window_->openModel(modelPath, layer)) {
    const QString error = window_->lastError();
    QTimer::singleShot(0, this, [this, error] { finish(2, error); });
    return;
  }
  // A model opens on its own first page (a multi-label model's is Bias): the view asked for wins.
  window_->showPage(pageOf(view_));
  poll_.start();
}

void ScreenshotDriver::onStatistics() {
  if (statisticsSeen_) return;
  statisticsSeen_ = true;
  // The most loaded expert: the one with the richest gallery.
  const auto& stats = window_->expertsPage()->model()->statistics();
  int64_t best = -1, bestLoad = -1;
  for (const auto& e : stats.experts)
    if (e.load > bestLoad) {
      best = e.expert;
      bestLoad = e.load;
    }
  expert_ = best;
  if (view_ == StudioView::Compare) {
    // The model is open, so the page has its data SPEC and cache.
    window_->comparisonPage()->setLayer(comparedLayer_);
    window_->comparisonPage()->addModels(compared_);
    return;
  }
  if (expert_ < 0 || view_ == StudioView::Model) return;
  window_->expertsPage()->table()->sortByColumn(ExpertTableModel::Load, Qt::DescendingOrder);
  if (!subpopulation_.isEmpty()) {
    // A subpopulation is small: its samples with the largest coefficients, not a draw above 0.5.
    window_->expertsPage()->gallery()->setOrder(analysis::GalleryOrder::Top);
    if (!window_->expertsPage()->gallery()->setSubpopulation(subpopulation_)) {
      finish(2, tr("the subpopulation '%1' does not parse").arg(subpopulation_));
      return;
    }
  }
  window_->expertsPage()->selectExpert(expert_);
  if (view_ == StudioView::Ablation) window_->ablate({expert_});
}

bool ScreenshotDriver::ready() {
  if (view_ == StudioView::Bias)
    return comparisonSeen_ && window_->biasPage()->evaluation() && !window_->biasPage()->worker()->isBusy() &&
           window_->biasPage()->worker()->pending() == 0;
  if (view_ == StudioView::Tokens)
    return ablationSeen_ && window_->tokenPage()->worker()->pending() == 0;
  if (view_ == StudioView::Steering)
    return generationSeen_ && window_->steeringPage()->worker()->pending() == 0;
  if (!statisticsSeen_ || window_->controller()->isBusy()) return false;
  switch (view_) {
    case StudioView::Model: return true;
    case StudioView::Compare:
      return comparedSeen_ == compared_.size() && window_->comparisonPage()->worker()->pending() == 0;
    case StudioView::Gallery: {
      auto* gallery = window_->expertsPage()->gallery();
      window_->grab();  // paints: visible cells ask for their thumbnails
      return gallery->model()->rowCount() > 0 && !gallery->detail()->bars().isEmpty() &&
             window_->thumbnails()->pendingCount() == 0;
    }
    case StudioView::Ablation:  // an early ViT block's sweep waits for Run Sweep: not shown
      return ablationSeen_ && (sweepSeen_ || !window_->controller()->info().sweepIsCheap) &&
             window_->ablationChart()->hasOutcome();
    default: return false;
  }
}

void ScreenshotDriver::poll() {
  if (done_) return;
  stableTicks_ = ready() ? stableTicks_ + 1 : 0;
  if (stableTicks_ < 2) return;
  const QPixmap shot = window_->grab();
  if (!shot.save(output_, "PNG")) {
    finish(2, tr("cannot write %1").arg(output_));
    return;
  }
  finish(0, tr("wrote %1 (%2 × %3) in %4 s").arg(output_).arg(shot.width()).arg(shot.height()).arg(clock_.elapsed() / 1000.0, 0, 'f', 1));
}

void ScreenshotDriver::finish(int code, const QString& message) {
  if (done_) return;
  done_ = true;
  poll_.stop();
  timeout_.stop();
  Q_EMIT finished(code, message);
}

}  // namespace mumoe::ui
