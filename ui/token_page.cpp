#include "token_page.h"

#include <QApplication>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QElapsedTimer>
#include <QFontDatabase>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QListView>
#include <QMessageBox>
#include <QPainter>
#include <QPushButton>
#include <QSplitter>
#include <QStackedWidget>
#include <QTableWidget>
#include <QVBoxLayout>

#include <cmath>

#include "result_dialog.h"
#include "analysis/expert_report.h"
#include "analysis/text_analysis_session.h"
#include "io/errors.h"
#include "note_stack.h"
#include "worker_queue.h"

namespace mumoe::ui {

// ---------------------------------------------------------------------------------------------
// TokenGalleryModel

void TokenGalleryModel::setGallery(const analysis::TokenGallery& gallery) {
  beginResetModel();
  gallery_ = gallery;
  endResetModel();
}

int TokenGalleryModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(gallery_.items.size());
}

QVariant TokenGalleryModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() < 0 || index.row() >= rowCount()) return {};
  const auto& it = gallery_.items[static_cast<size_t>(index.row())];
  switch (role) {
    case Qt::DisplayRole:
      return QString::fromStdString(it.context.before) + QStringLiteral("«") + QString::fromStdString(it.context.token) +
             QStringLiteral("»") + QString::fromStdString(it.context.after);
    case Qt::ToolTipRole:
      return tr("a = %1 · sequence %2, position %3 · document %4 · next token %5, predicted %6")
          .arg(it.coefficient, 0, 'f', 3)
          .arg(it.sequence)
          .arg(it.position)
          .arg(it.document)
          .arg(it.target)
          .arg(it.prediction);
    case BeforeRole: return QString::fromStdString(it.context.before);
    case TokenRole: return QString::fromStdString(it.context.token);
    case AfterRole: return QString::fromStdString(it.context.after);
    case CoefficientRole: return it.coefficient;
    case PositionRole: return QStringLiteral("seq %1 · pos %2").arg(it.sequence).arg(it.position);
    case CorrectRole: return it.prediction == it.target;
    default: return {};
  }
}

// ---------------------------------------------------------------------------------------------
// TokenContextDelegate

QSize TokenContextDelegate::sizeHint(const QStyleOptionViewItem& option, const QModelIndex&) const {
  QFont mono = QFontDatabase::systemFont(QFontDatabase::FixedFont);
  return QSize(200, QFontMetrics(mono).height() + 10);  // the view's width: no horizontal scrolling
}

void TokenContextDelegate::paint(QPainter* p, const QStyleOptionViewItem& option, const QModelIndex& index) const {
  QStyleOptionViewItem opt(option);
  initStyleOption(&opt, index);
  opt.text.clear();
  QApplication::style()->drawControl(QStyle::CE_ItemViewItem, &opt, p, opt.widget);
  p->save();
  QFont mono = QFontDatabase::systemFont(QFontDatabase::FixedFont);
  p->setFont(mono);
  const QFontMetrics fm(mono);
  const QRect r = option.rect.adjusted(6, 0, -6, 0);
  const bool selected = option.state & QStyle::State_Selected;
  const QColor text = selected ? option.palette.highlightedText().color() : option.palette.text().color();
  const QColor dim = selected ? text : QColor(0x70, 0x70, 0x70);

  // a_n, then whether the model predicted the next token (✓/✗).
  const double a = index.data(TokenGalleryModel::CoefficientRole).toDouble();
  const QString coefficient = QStringLiteral("a=%1").arg(a, 0, 'f', 2);
  const int coeffWidth = fm.horizontalAdvance(QStringLiteral("a=0.00 ✓ "));
  p->setPen(selected ? text : QColor(0x1b, 0x7f, 0x3b));
  p->drawText(QRect(r.left(), r.top(), coeffWidth, r.height()), Qt::AlignVCenter | Qt::AlignLeft, coefficient);
  const bool correct = index.data(TokenGalleryModel::CorrectRole).toBool();
  p->setPen(selected ? text : correct ? QColor(0x1b, 0x7f, 0x3b) : QColor(0xb0, 0x2a, 0x2a));
  p->drawText(QRect(r.left() + fm.horizontalAdvance(QStringLiteral("a=0.00 ")), r.top(), fm.horizontalAdvance(QStringLiteral("✓ ")), r.height()),
              Qt::AlignVCenter | Qt::AlignLeft, correct ? QStringLiteral("✓") : QStringLiteral("✗"));

  // The token centred in the remaining width; context elided on the outer sides.
  const QRect textRect(r.left() + coeffWidth, r.top(), r.width() - coeffWidth, r.height());
  const QString token = index.data(TokenGalleryModel::TokenRole).toString();
  const int tokenWidth = fm.horizontalAdvance(token) + 6;
  const int centre = textRect.left() + std::max(textRect.width() * 2 / 5, tokenWidth);
  const int beforeWidth = centre - textRect.left();
  const int afterWidth = textRect.right() - (centre + tokenWidth);
  const QString before = fm.elidedText(index.data(TokenGalleryModel::BeforeRole).toString(), Qt::ElideLeft, beforeWidth);
  const QString after = fm.elidedText(index.data(TokenGalleryModel::AfterRole).toString(), Qt::ElideRight, std::max(afterWidth, 0));
  p->setPen(dim);
  p->drawText(QRect(textRect.left(), r.top(), beforeWidth, r.height()), Qt::AlignVCenter | Qt::AlignRight, before);
  const QRect tokenRect(centre, r.top() + 3, tokenWidth, r.height() - 6);
  p->fillRect(tokenRect, QColor(0xff, 0xd8, 0x4d));
  p->setPen(QColor(0x20, 0x20, 0x20));
  QFont bold = mono;
  bold.setBold(true);
  p->setFont(bold);
  p->drawText(tokenRect, Qt::AlignCenter, token);
  p->setFont(mono);
  p->setPen(dim);
  p->drawText(QRect(centre + tokenWidth, r.top(), std::max(afterWidth, 0), r.height()), Qt::AlignVCenter | Qt::AlignLeft, after);
  p->restore();
}

// ---------------------------------------------------------------------------------------------
// TokenPage

struct TokenPage::Slot {
  std::unique_ptr<analysis::TextAnalysisSession> session;
  analysis::TextAnalysisSession& get() {
    if (!session) throw UsageError("no text analysis session is open");
    return *session;
  }
};

namespace {

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

TokenPage::TokenPage(QWidget* parent) : QWidget(parent), slot_(std::make_shared<Slot>()) {
  worker_ = new WorkerQueue(this);
  connect(worker_, &WorkerQueue::failed, this, &TokenPage::failed);

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
  threshold_ = new QDoubleSpinBox;
  threshold_->setRange(0.05, 1.0);
  threshold_->setSingleStep(0.05);
  threshold_->setValue(0.5);
  threshold_->setPrefix(tr("threshold "));
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

  auto* split = new QSplitter(Qt::Horizontal);
  split->addWidget(left);
  split->addWidget(right);
  split->setStretchFactor(1, 1);
  split->setSizes({420, 900});
  left->setMinimumWidth(left->fontMetrics().horizontalAdvance(QStringLiteral("Expert  Load  Support  Mean a")) + 60);
  auto* content = new QWidget;
  auto* cv = new QVBoxLayout(content);
  cv->setContentsMargins(6, 6, 6, 6);
  cv->addWidget(header_);
  cv->addWidget(split, 1);

  stack_ = new NoteStack(content);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(stack_);
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
  worker_->shutdown();  // the session dies with slot_ once the worker has let go of it
}

QString TokenPage::ablationHint() const {
  return tr("<i>Double-click an expert (or press Ablate Expert) to see what removing it does to next-token "
            "prediction.</i>");
}

void TokenPage::showNote(const QString& html) {
  worker_->cancel();
  worker_->invalidate();
  hasSession_ = false;
  // Release the session and its arrays (the model open now is of another kind).
  auto slot = slot_;
  worker_->submit(tr("Closing"), [slot](const std::function<bool()>&) -> WorkerQueue::Deliver {
    slot->session.reset();
    return {};
  }, /*cancellable=*/false, /*visible=*/false);
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
  worker_->cancel();
  worker_->invalidate();
  hasSession_ = false;
  hasAblation_ = false;
  ablation_->setText(ablationHint());  // the last layer's result names no layer: it must not stay
  model_->setGallery({});
  experts_->setRowCount(0);
  stack_->showNote(tr("<h3>Tokens</h3><p><i>Extracting %1 of %2 on its validation split…</i></p>")
                     .arg(layer_->currentText().toHtmlEscaped(), QFileInfo(modelPath_).fileName().toHtmlEscaped()));
  analysis::TextSessionOptions options;
  options.model_path = modelPath_.toStdString();
  options.layer = layer_->currentText().toStdString();
  options.cache_path = cachePath_.toStdString();
  auto slot = slot_;
  // The endings replace the "Extracting…" note the job leaves.
  WorkerQueue::Handlers endings;
  endings.failed = [this](const QString& message) {
    stack_->showNote(tr("<h3>Tokens</h3><p style='color:#b02a2a'>%1</p>").arg(message.toHtmlEscaped()));
    Q_EMIT openFailed(message);
  };
  endings.cancelled = [this] {
    stack_->showNote(tr("<h3>Tokens</h3><p><i>Cancelled. Press Analyze (F5) to extract this model's tokens again.</i></p>"));
  };
  worker_->submit(tr("Opening the token view"), [this, slot, options](const std::function<bool()>& cancelled) -> WorkerQueue::Deliver {
    QElapsedTimer clock;
    clock.start();
    slot->session.reset();
    auto session = analysis::TextAnalysisSession::open_extracted(options, [&](const analysis::ExtractionProgress& p) {
      worker_->postProgress(tr("Extracting tokens"), p.samples_done, p.samples_total, p.eta_seconds);
      return !cancelled();
    });
    const QString cacheNote = QString::fromStdString(cache::opening_note(session->cache_report()));
    const auto statistics = session->statistics(0.5);
    std::vector<ExpertRow> rows;
    for (const auto& e : statistics.experts) rows.push_back({e.load, e.support, e.mean_coefficient});
    const QString identity = QString::fromStdString(session->eval_set().identity);
    const qint64 tokenCount = statistics.samples;
    const int blockIndex = static_cast<int>(session->layer_index());
    slot->session = std::move(session);
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
  }, /*cancellable=*/true, /*visible=*/true, endings);
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
  auto slot = slot_;
  worker_->submit(tr("Token gallery"), [this, slot, request](const std::function<bool()>&) -> WorkerQueue::Deliver {
    auto answer = slot->get().gallery(request);
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
  }, true, false, {[this](const QString& message) { showErrorDialog(message); }, {}});
}

void TokenPage::ablate(qint64 expert) {
  if (!hasSession_) return;
  ablation_->setText(tr("<i>Ablating expert %1…</i>").arg(expert));
  auto slot = slot_;
  WorkerQueue::Handlers ablationEndings;
  ablationEndings.failed = [this](const QString& message) {
    ablation_->setText(tr("<span style='color:#b02a2a'>%1</span>").arg(message.toHtmlEscaped()));
  };
  ablationEndings.cancelled = [this] { ablation_->setText(tr("<i>Ablation cancelled.</i>")); };
  worker_->submit(tr("Token ablation"), [this, slot, expert](const std::function<bool()>& cancelled) -> WorkerQueue::Deliver {
    auto answer = slot->get().ablate({expert}, analysis::AblationMethod::Sparse, false, [&](int64_t done, int64_t total) {
      worker_->postProgress(tr("Token ablation"), done, total);
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
  auto slot = slot_;
  const QString task = tr("Writing the report");
  worker_->submit(task, [this, slot, path, experts, task, model = modelPath_](const std::function<bool()>& cancelled) -> WorkerQueue::Deliver {
    auto& session = slot->get();
    analysis::ReportRequest request;  // as `mumoe report` asks for it
    request.model_path = model.toStdString();
    request.data_spec = session.eval_set().identity;
    request.experts = experts.toStdString();
    request.app_version = MUMOE_VERSION;
    const auto report = analysis::make_token_report(session, request, [&](int64_t done, int64_t total) {
      worker_->postProgress(task, done, total);
      return !cancelled();
    });
    const auto bytes = static_cast<qint64>(
        analysis::write_report(report, path.toStdString(), {{request.model_path, "the model"}, {session.cache_path(), "the analysis cache"}}));
    return [this, path, sections = static_cast<int>(report.details.size()), bytes](double) {
      Q_EMIT reportExported(path, sections, bytes);
    };
  }, /*cancellable=*/true, /*visible=*/true, {[this](const QString& message) { showErrorDialog(message); }, {}});
}

void TokenPage::showErrorDialog(const QString& message) {
  if (errorDialogs_) showResultDialog(this, QMessageBox::Warning, tr("Tokens"), message);
}

}  // namespace mumoe::ui
