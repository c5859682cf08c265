#include "token_page.h"

#include <QApplication>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QListView>
#include <QMessageBox>
#include <QPushButton>
#include <QSplitter>
#include <QStackedWidget>
#include <QTableWidget>
#include <QVBoxLayout>

#include <cmath>

#include "controls.h"
#include "result_dialog.h"
#include "analysis/expert_report.h"
#include "analysis/text_analysis_session.h"
#include "io/errors.h"
#include "note_stack.h"
#include "text_session_host.h"
#include "worker_queue.h"

namespace mumoe::ui {

namespace {

/// The page's jobs on the shared queue carry this topic: the page cancels and drops only its own.
const QString kTokensTopic = QStringLiteral("tokens");

/// Worker thread only: the session the page reads, `layer` of `model` on its validation split
/// (the data the Steering page reads too, so the two share one session while they show the same
/// layer). Another page may have opened another layer on the shared host since: it is read back
/// from the cache (a pass over the text only if the cache lost it).
analysis::TextAnalysisSession& sessionOnWorker(TextSessionHost* host, const QString& model, const QString& layer,
                                               const QString& cache, const std::function<bool()>& cancelled) {
  analysis::TextSessionOptions options;
  options.model_path = model.toStdString();
  options.layer = layer.toStdString();
  options.cache_path = cache.toStdString();
  return host->session(options, cancelled);
}

struct ExpertRow {
  qint64 load = 0, support = 0;
  double mean = 0;
};

/// Sorts numerically by Qt::UserRole.
class NumberItem : public QTableWidgetItem {
 public:
  using QTableWidgetItem::QTableWidgetItem;
  bool operator<(const QTableWidgetItem& other) const override {
    return data(Qt::UserRole).toDouble() < other.data(Qt::UserRole).toDouble();
  }
};

QTableWidgetItem* sortable(double v, const QString& text) {
  auto* it = new NumberItem(text);
  it->setData(Qt::UserRole, v);
  it->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
  it->setFlags(Qt::ItemIsEnabled | Qt::ItemIsSelectable);
  return it;
}

}  // namespace

TokenPage::TokenPage(TextSessionHost* host, QWidget* parent)
    : QWidget(parent), host_(host ? host : new TextSessionHost(this)), ownsHost_(host == nullptr) {

  header_ = new QLabel;
  header_->setTextFormat(Qt::RichText);
  header_->setWordWrap(true);
  layer_ = new QComboBox;
  layer_->setToolTip(tr("The μMoE MLP block whose experts are shown"));
  experts_ = new QTableWidget(0, 4);
  experts_->setHorizontalHeaderLabels({tr("Expert"), tr("Load"), tr("Support"), tr("Mean a")});
  experts_->horizontalHeaderItem(1)->setToolTip(tr("Tokens with a_n ≥ 0.5"));
  experts_->horizontalHeaderItem(2)->setToolTip(tr("Tokens with a_n > 0 (those an ablation can change)"));
  experts_->horizontalHeaderItem(3)->setToolTip(tr("Mean a_n over all tokens"));
  experts_->verticalHeader()->hide();
  experts_->verticalHeader()->setDefaultSectionSize(experts_->fontMetrics().height() + 8);
  experts_->setSelectionBehavior(QAbstractItemView::SelectRows);
  experts_->setSelectionMode(QAbstractItemView::SingleSelection);
  experts_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  experts_->setAlternatingRowColors(true);
  experts_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  experts_->setSortingEnabled(true);
  experts_->setToolTip(tr("Double-click an expert to ablate it"));

  auto* left = new QWidget;
  auto* lv = new QVBoxLayout(left);
  lv->setContentsMargins(0, 0, 4, 0);
  auto* layerRow = new QHBoxLayout;
  layerRow->addWidget(new QLabel(tr("Layer")));
  layerRow->addWidget(layer_, 1);
  lv->addLayout(layerRow);
  lv->addWidget(experts_, 1);
  ablateButton_ = new QPushButton(tr("Ablate Expert"));
  ablateButton_->setToolTip(tr("Remove the selected expert and measure next-token accuracy and loss"));
  lv->addWidget(ablateButton_);

  order_ = new QComboBox;
  order_->addItem(tr("Random (a ≥ threshold)"));
  order_->addItem(tr("Top (largest a)"));
  threshold_ = makeThresholdBox(0.05, tr("threshold "));
  shuffle_ = new QPushButton(tr("Reshuffle"));
  galleryTitle_ = new QLabel;
  galleryTitle_->setTextFormat(Qt::RichText);
  // Its width must not decide the page's: at 1024 px the expert table was squeezed to "…" columns
  // to make room for the whole line (the tooltip keeps it).
  galleryTitle_->setMinimumWidth(120);
  galleryTitle_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  model_ = new TokenGalleryModel(this);
  gallery_ = new QListView;
  gallery_->setModel(model_);
  gallery_->setItemDelegate(new TokenContextDelegate(gallery_));
  gallery_->setUniformItemSizes(true);
  gallery_->setAlternatingRowColors(true);
  gallery_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  ablation_ = new QLabel;
  ablation_->setWordWrap(true);
  ablation_->setTextFormat(Qt::RichText);
  ablation_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  ablation_->setText(ablationHint());

  auto* right = new QWidget;
  auto* rv = new QVBoxLayout(right);
  rv->setContentsMargins(4, 0, 0, 0);
  auto* controls = new QHBoxLayout;
  controls->addWidget(galleryTitle_, 1);
  controls->addWidget(order_);
  controls->addWidget(threshold_);
  controls->addWidget(shuffle_);
  rv->addLayout(controls);
  rv->addWidget(gallery_, 1);
  rv->addWidget(ablation_);

  auto* split = makeSplitter(Qt::Horizontal, QString(), left, right, 0, 1);
  split->setSizes({420, 900});
  left->setMinimumWidth(left->fontMetrics().horizontalAdvance(QStringLiteral("Expert  Load  Support  Mean a")) + 60);
  stack_ = NoteStack::fillPage(this, header_, split);
  showNote(tr("<h3>Tokens</h3><p>Open a μMoE GPT (e.g. the bundled <code>gpt-fortunes.mumoe.safetensors</code>) to "
              "see the tokens each expert of its MLP blocks processes, in context, and what removing an expert does "
              "to next-token prediction.</p>"));

  connect(layer_, &QComboBox::currentIndexChanged, this, [this] { openLayer(); });
  connect(experts_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this] {
    requestGallery();
    if (hasSession_ && currentExpert() >= 0) Q_EMIT expertSelected(blockIndex_, currentExpert());
  });
  connect(experts_, &QTableWidget::cellDoubleClicked, this, [this](int row) {
    if (auto* it = experts_->item(row, 0)) ablate(it->data(Qt::UserRole).toLongLong());
  });
  connect(ablateButton_, &QPushButton::clicked, this, [this] {
    if (currentExpert() >= 0) ablate(currentExpert());
  });
  connect(order_, &QComboBox::currentIndexChanged, this, [this] {
    threshold_->setEnabled(order_->currentIndex() == 0);
    requestGallery();
  });
  connect(threshold_, &QDoubleSpinBox::valueChanged, this, [this] { requestGallery(); });
  connect(shuffle_, &QPushButton::clicked, this, [this] {
    ++seed_;
    requestGallery();
  });
}

TokenPage::~TokenPage() {
  if (ownsHost_) {
    host_->shutdown();  // closing must not wait for a whole extraction: it is cancelled
  } else if (host_) {
    worker()->cancel(kTokensTopic);  // a shared host outlives the page: its answers must not reach it
    worker()->invalidate(kTokensTopic);
  }
}

WorkerQueue* TokenPage::worker() const { return host_->worker(); }

WorkerQueue::Handlers TokenPage::endings(const QString& task, std::function<void(const QString&)> failed,
                                         std::function<void()> cancelled) {
  WorkerQueue::Handlers handlers;
  handlers.topic = kTokensTopic;
  handlers.failed = [this, task, failed = std::move(failed)](const QString& message) {
    if (failed) failed(message);
    Q_EMIT this->failed(task, message);
  };
  handlers.cancelled = std::move(cancelled);
  return handlers;
}

QString TokenPage::ablationHint() const {
  return tr("<i>Double-click an expert (or press Ablate Expert) to see what removing it does to next-token "
            "prediction.</i>");
}

void TokenPage::showNote(const QString& html) {
  worker()->cancel(kTokensTopic);
  worker()->invalidate(kTokensTopic);
  hasSession_ = false;
  // Release the session and its arrays (the model open now is of another kind).
  TextSessionHost* host = host_;
  worker()->submit(tr("Closing"), [host](const std::function<bool()>&) -> WorkerQueue::Deliver {
    host->release();
    return {};
  }, /*cancellable=*/false, /*visible=*/false, endings(tr("Closing")));
  stack_->showNote(html);
}

void TokenPage::open(const QString& modelPath, const QStringList& layers, const QString& cachePath) {
  modelPath_ = modelPath;
  cachePath_ = cachePath;
  const bool block = layer_->blockSignals(true);
  layer_->clear();
  layer_->addItems(layers);
  // The last block: the one closest to the output (the CLI's usual example, layer 2 of the demo).
  layer_->setCurrentIndex(static_cast<int>(layers.size()) - 1);
  layer_->blockSignals(block);
  openLayer();
}

void TokenPage::openLayer() {
  worker()->cancel(kTokensTopic);
  worker()->invalidate(kTokensTopic);
  hasSession_ = false;
  hasAblation_ = false;
  ablation_->setText(ablationHint());  // the last layer's result names no layer: it must not stay
  model_->setGallery({});
  experts_->setRowCount(0);
  stack_->showNote(tr("<h3>Tokens</h3><p><i>Extracting %1 of %2 on its validation split…</i></p>")
                     .arg(layer_->currentText().toHtmlEscaped(), QFileInfo(modelPath_).fileName().toHtmlEscaped()));
  layerName_ = layer_->currentText();
  // The endings replace the "Extracting…" note the job leaves.
  auto openEndings = endings(
      tr("Opening the token view"),
      [this](const QString& message) {
        stack_->showNote(tr("<h3>Tokens</h3><p style='color:#b02a2a'>%1</p>").arg(message.toHtmlEscaped()));
        Q_EMIT openFailed(message);
      },
      [this] {
        stack_->showNote(
            tr("<h3>Tokens</h3><p><i>Cancelled. Press Analyze (F5) to extract this model's tokens again.</i></p>"));
      });
  // The job's body touches only the host and its queue (the page may be gone by the time it runs);
  // the answer, run on the GUI thread only if still current, fills the page.
  TextSessionHost* host = host_;
  worker()->submit(tr("Opening the token view"), [this, host, model = modelPath_, layer = layerName_, cache = cachePath_](
                                                     const std::function<bool()>& cancelled) -> WorkerQueue::Deliver {
    QElapsedTimer clock;
    clock.start();
    auto& session = sessionOnWorker(host, model, layer, cache, cancelled);
    const QString cacheNote = QString::fromStdString(cache::opening_note(session.cache_report()));
    const auto statistics = session.statistics(0.5);
    std::vector<ExpertRow> rows;
    for (const auto& e : statistics.experts) rows.push_back({e.load, e.support, e.mean_coefficient});
    const QString identity = QString::fromStdString(session.eval_set().identity);
    const qint64 tokenCount = statistics.samples;
    const int blockIndex = static_cast<int>(session.layer_index());
    const double seconds = static_cast<double>(clock.nsecsElapsed()) / 1e9;
    return [this, rows, identity, tokenCount, seconds, cacheNote, blockIndex](double) {
      hasSession_ = true;
      dataIdentity_ = identity;
      blockIndex_ = blockIndex;
      if (!cacheNote.isEmpty()) showErrorDialog(tr("Analysis cache: %1").arg(cacheNote));
      header_->setText(tr("<b>%1</b> · %2 · %3 tokens of %4 · ready in %5 s")
                           .arg(QFileInfo(modelPath_).fileName().toHtmlEscaped(), layer_->currentText().toHtmlEscaped())
                           .arg(QLocale().toString(tokenCount))
                           .arg(identity.toHtmlEscaped())
                           .arg(seconds, 0, 'f', 1));
      experts_->setSortingEnabled(false);
      experts_->setRowCount(static_cast<int>(rows.size()));
      qint64 best = 0;
      for (int e = 0; e < static_cast<int>(rows.size()); ++e) {
        const auto& r = rows[static_cast<size_t>(e)];
        experts_->setItem(e, 0, sortable(e, QString::number(e)));
        experts_->setItem(e, 1, sortable(static_cast<double>(r.load), QLocale().toString(r.load)));
        experts_->setItem(e, 2, sortable(static_cast<double>(r.support), QLocale().toString(r.support)));
        experts_->setItem(e, 3, sortable(r.mean, QString::number(r.mean, 'f', 3)));
        if (r.load > rows[static_cast<size_t>(best)].load) best = e;
      }
      experts_->setSortingEnabled(true);
      experts_->sortByColumn(1, Qt::DescendingOrder);
      stack_->showContent();
      Q_EMIT opened();
      selectExpert(best);
    };
  }, /*cancellable=*/true, /*visible=*/true, openEndings);
}

qint64 TokenPage::currentExpert() const {
  const int row = experts_->currentRow();
  auto* it = row >= 0 ? experts_->item(row, 0) : nullptr;
  return it ? it->data(Qt::UserRole).toLongLong() : -1;
}

void TokenPage::selectExpert(qint64 expert) {
  for (int r = 0; r < experts_->rowCount(); ++r)
    if (experts_->item(r, 0) && experts_->item(r, 0)->data(Qt::UserRole).toLongLong() == expert) {
      experts_->setCurrentCell(r, 0);
      experts_->scrollToItem(experts_->item(r, 0));
      return;
    }
}

void TokenPage::requestGallery() {
  const qint64 expert = currentExpert();
  if (!hasSession_ || expert < 0) return;
  analysis::GalleryRequest request;
  request.expert = expert;
  request.order = order_->currentIndex() == 0 ? analysis::GalleryOrder::Random : analysis::GalleryOrder::Top;
  request.threshold = threshold_->value();
  request.count = 40;
  request.seed = seed_;
  TextSessionHost* host = host_;
  worker()->submit(tr("Token gallery"), [this, host, request, model = modelPath_, layer = layerName_, cache = cachePath_](
                                            const std::function<bool()>& cancelled) -> WorkerQueue::Deliver {
    auto answer = sessionOnWorker(host, model, layer, cache, cancelled).gallery(request);
    return [this, gallery = answer.value, fromCache = answer.from_cache](double ms) {
      if (gallery.request.expert != currentExpert()) return;  // a newer selection follows
      model_->setGallery(gallery);
      galleryTitle_->setText(tr("<b>Expert %1</b> · %2 of %3 eligible tokens · ✓/✗ next token predicted right/wrong · %4 ms%5")
                                 .arg(gallery.request.expert)
                                 .arg(gallery.items.size())
                                 .arg(QLocale().toString(static_cast<qlonglong>(gallery.eligible)))
                                 .arg(ms, 0, 'f', 0)
                                 .arg(fromCache ? tr(" (cached)") : QString()));
      galleryTitle_->setToolTip(galleryTitle_->text());
      Q_EMIT galleryReady();
    };
  },
  // Visible (as the Experts page's galleries are): a gallery is a lookup, but when the Steering
  // page has moved the shared session to another layer the job first reopens this one.
  /*cancellable=*/true, /*visible=*/true, endings(tr("Token gallery"), [this](const QString& message) { showErrorDialog(message); }));
}

void TokenPage::ablate(qint64 expert) {
  if (!hasSession_) return;
  ablation_->setText(tr("<i>Ablating expert %1…</i>").arg(expert));
  auto ablationEndings = endings(
      tr("Token ablation"),
      [this](const QString& message) {
        ablation_->setText(tr("<span style='color:#b02a2a'>%1</span>").arg(message.toHtmlEscaped()));
      },
      [this] { ablation_->setText(tr("<i>Ablation cancelled.</i>")); });
  TextSessionHost* host = host_;
  const QString task = tr("Token ablation");
  worker()->submit(task, [this, host, expert, task, model = modelPath_, layer = layerName_, cache = cachePath_](
                             const std::function<bool()>& cancelled) -> WorkerQueue::Deliver {
    auto& session = sessionOnWorker(host, model, layer, cache, cancelled);
    auto answer = session.ablate({expert}, analysis::AblationMethod::Sparse, false, [&](int64_t done, int64_t total) {
      host->worker()->postProgress(task, done, total);
      return !cancelled();
    });
    return [this, report = answer.value, fromCache = answer.from_cache](double ms) {
      ablationReport_ = report;
      hasAblation_ = true;
      const auto& b = report.baseline;
      const auto& o = report.experts.front();
      const double accBefore = b.before.overall * 100, accAfter = o.outcome.after.overall * 100;
      const double d = accAfter - accBefore;
      ablation_->setText(
          tr("<b>Ablating expert %1 of %12</b>: next-token accuracy %2 % → %3 % (<span style='color:%4'>%5%6 pp</span>), "
             "loss %7 → %8 nats/token · %9 tokens affected, %10 predictions changed · %11")
              .arg(o.outcome.experts.empty() ? -1 : o.outcome.experts.front())
              .arg(accBefore, 0, 'f', 2)
              .arg(accAfter, 0, 'f', 2)
              .arg(d < 0 ? QStringLiteral("#b02a2a") : QStringLiteral("#1b7f3b"))
              .arg(d >= 0 ? QStringLiteral("+") : QString())
              .arg(d, 0, 'f', 2)
              .arg(b.loss_before, 0, 'f', 4)
              .arg(o.loss_after, 0, 'f', 4)
              .arg(QLocale().toString(static_cast<qlonglong>(o.outcome.affected_samples)))
              .arg(QLocale().toString(static_cast<qlonglong>(o.outcome.changed_predictions)))
              .arg(fromCache ? tr("cached, %1 ms").arg(ms, 0, 'f', 0) : tr("%1 ms").arg(ms, 0, 'f', 0))
              .arg(layer_->currentText().toHtmlEscaped()));
      Q_EMIT ablationReady();
    };
  }, /*cancellable=*/true, /*visible=*/true, ablationEndings);
}

void TokenPage::exportReport(const QString& path, const QString& experts) {
  if (!hasSession_) return;
  TextSessionHost* host = host_;
  const QString task = tr("Writing the report");
  worker()->submit(task, [this, host, path, experts, task, model = modelPath_, layer = layerName_, cache = cachePath_](
                             const std::function<bool()>& cancelled) -> WorkerQueue::Deliver {
    auto& session = sessionOnWorker(host, model, layer, cache, cancelled);
    analysis::ReportRequest request;  // as `mumoe report` asks for it
    request.model_path = model.toStdString();
    request.data_spec = session.eval_set().identity;
    request.experts = experts.toStdString();
    request.app_version = MUMOE_VERSION;
    const auto report = analysis::make_token_report(session, request, [&](int64_t done, int64_t total) {
      host->worker()->postProgress(task, done, total);
      return !cancelled();
    });
    const auto bytes = static_cast<qint64>(
        analysis::write_report(report, path.toStdString(), {{request.model_path, "the model"}, {session.cache_path(), "the analysis cache"}}));
    return [this, path, sections = static_cast<int>(report.details.size()), bytes](double) {
      Q_EMIT reportExported(path, sections, bytes);
    };
  }, /*cancellable=*/true, /*visible=*/true, endings(task, [this](const QString& message) { showErrorDialog(message); }));
}

void TokenPage::showErrorDialog(const QString& message) {
  if (errorDialogs_) showResultDialog(this, QMessageBox::Warning, tr("Tokens"), message);
}

}  // namespace mumoe::ui
