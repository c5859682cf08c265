#include "gallery_view.h"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QListView>
#include <QLocale>
#include <QMenu>
#include <QSlider>
#include <QSpinBox>
#include <QSplitter>
#include <QToolButton>
#include <QVBoxLayout>

#include "controls.h"
#include "gallery_delegate.h"
#include "gallery_model.h"
#include "sample_detail.h"
#include "session_controller.h"
#include "editing/subpopulation.h"
#include "thumbnail_store.h"

namespace mumoe::ui {

GalleryView::GalleryView(ThumbnailStore* store, QWidget* parent) : QWidget(parent), store_(store) {
  title_ = new QLabel;
  title_->setTextFormat(Qt::RichText);
  title_->setWordWrap(true);

  order_ = new QComboBox;
  order_->addItem(tr("Random, a ≥ threshold"), int(analysis::GalleryOrder::Random));
  order_->addItem(tr("Top-ranked by a"), int(analysis::GalleryOrder::Top));
  order_->setToolTip(tr("A seeded random draw among the samples that use the expert (the paper's galleries), "
                        "or the samples with the largest coefficient"));
  threshold_ = new QDoubleSpinBox;
  threshold_->setRange(0.01, 1.0);
  threshold_->setSingleStep(0.05);
  threshold_->setValue(0.5);
  threshold_->setPrefix(tr("a ≥ "));
  count_ = new QSpinBox;
  count_->setRange(1, 10000);
  count_->setValue(64);
  count_->setSuffix(tr(" samples"));
  count_->setAccelerated(true);
  seed_ = new QSpinBox;
  seed_->setRange(0, 1'000'000);
  seed_->setPrefix(tr("seed "));
  subpopulation_ = new QLineEdit;
  subpopulation_->setObjectName(QStringLiteral("gallerySubpopulation"));
  subpopulation_->setPlaceholderText(tr("subpopulation, e.g. long_sleeves=1&frame=1"));
  subpopulation_->setClearButtonEnabled(true);
  subpopulation_->setMinimumWidth(subpopulation_->fontMetrics().horizontalAdvance(QStringLiteral("long_sleeves=1&frame=1")) + 40);
  subpopulation_->setVisible(false);
  zoom_ = new QSlider(Qt::Horizontal);
  zoom_->setRange(40, 192);
  zoom_->setValue(84);
  zoom_->setFixedWidth(90);
  zoom_->setToolTip(tr("Thumbnail size"));
  auto* exportButton = new QToolButton;
  exportButton->setText(tr("Export…"));
  exportButton->setToolTip(tr("Save the gallery: PNG holds all of it as a contact sheet, SVG the visible part"));

  auto* controls = new QHBoxLayout;
  controls->setContentsMargins(0, 0, 0, 0);
  controls->addWidget(order_);
  controls->addWidget(threshold_);
  controls->addWidget(count_);
  controls->addWidget(seed_);
  controls->addWidget(subpopulation_, 2);
  controls->addStretch(1);
  controls->addWidget(new QLabel(tr("Size")));
  controls->addWidget(zoom_);
  controls->addWidget(exportButton);

  model_ = new GalleryModel(store_, this);
  model_->setThumbnailSide(zoom_->value());
  delegate_ = new GalleryDelegate(this);
  delegate_->setSide(zoom_->value());
  list_ = new QListView;
  list_->setModel(model_);
  list_->setItemDelegate(delegate_);
  list_->setViewMode(QListView::IconMode);
  list_->setResizeMode(QListView::Adjust);
  list_->setMovement(QListView::Static);
  list_->setUniformItemSizes(true);  // no size query per item: 10,000 items lay out at once
  list_->setLayoutMode(QListView::Batched);
  list_->setBatchSize(500);
  list_->setSpacing(1);
  list_->setSelectionMode(QAbstractItemView::SingleSelection);
  list_->setContextMenuPolicy(Qt::CustomContextMenu);
  list_->setVerticalScrollMode(QAbstractItemView::ScrollPerPixel);
  list_->setStyleSheet(QStringLiteral("QListView { background: #2b2b2b; }"));

  detail_ = new SampleDetail;
  connect(detail_, &SampleDetail::expertClicked, this, &GalleryView::expertChosen);
  auto* splitter = makeSplitter(Qt::Horizontal, QStringLiteral("gallerySplitter"), list_, detail_, 3, 1);
  splitter->setCollapsible(0, false);

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(title_);
  layout->addLayout(controls);
  layout->addWidget(splitter, 1);

  auto changed = [this] {
    if (expert_ >= 0) Q_EMIT requestChanged();
  };
  connect(order_, &QComboBox::currentIndexChanged, this, [this, changed] {
    threshold_->setEnabled(request().order == analysis::GalleryOrder::Random);
    changed();
  });
  connect(threshold_, &QDoubleSpinBox::editingFinished, this, changed);
  connect(count_, &QSpinBox::editingFinished, this, changed);
  connect(seed_, &QSpinBox::valueChanged, this, changed);
  connect(subpopulation_, &QLineEdit::returnPressed, this, [this] { setSubpopulation(subpopulation_->text()); });
  connect(subpopulation_, &QLineEdit::textChanged, this, [this](const QString& text) {
    if (text.isEmpty() && !subpopulationText_.isEmpty()) setSubpopulation({});  // the clear button
  });
  connect(zoom_, &QSlider::valueChanged, this, [this](int side) {
    delegate_->setSide(side);
    model_->setThumbnailSide(side);
    list_->doItemsLayout();
  });
  connect(exportButton, &QToolButton::clicked, this, &GalleryView::exportRequested);
  connect(list_, &QListView::clicked, this, [this](const QModelIndex& index) { activateRow(index.row()); });
  connect(list_->selectionModel(), &QItemSelectionModel::currentChanged, this,
          [this](const QModelIndex& index) { activateRow(index.row()); });
  connect(list_, &QWidget::customContextMenuRequested, this, &GalleryView::contextMenu);
  if (store_)
    connect(store_, &ThumbnailStore::imagesArrived, this, [this](const QVector<qint64>& keys) {
      if (detail_->sample() >= 0 && keys.contains(detailKey_)) detail_->setImage(store_->image(detailKey_));
    });
  clear();
}

void GalleryView::setExpert(qint64 mode, qint64 expert) {
  if (mode == mode_ && expert == expert_) return;
  mode_ = mode;
  expert_ = expert;
  if (expert_ < 0) {
    clear();
    return;
  }
  model_->clear();
  detail_->clear();
  title_->setText(tr("<b>Expert %1</b> <span style='color:#666'>loading…</span>").arg(expert));
  Q_EMIT requestChanged();
}

void GalleryView::setOrder(analysis::GalleryOrder order) { order_->setCurrentIndex(order_->findData(int(order))); }
void GalleryView::setCount(int count) {
  count_->setValue(count);
  if (expert_ >= 0) Q_EMIT requestChanged();
}

void GalleryView::setAttributes(const QStringList& names) {
  if (names == attributes_) return;  // the same data: the filter still applies
  attributes_ = names;
  subpopulation_->setVisible(!names.isEmpty());
  subpopulation_->setToolTip(tr("Only samples of a subpopulation of the data's attributes: conditions A=0 or A=1 "
                                "joined by &. Attributes: %1")
                                 .arg(names.join(QStringLiteral(", "))));
  subpopulation_->clear();
  subpopulation_->setStyleSheet({});
  subpopulationText_.clear();
}

bool GalleryView::setSubpopulation(const QString& text) {
  QString canonical;
  if (!text.trimmed().isEmpty()) {
    try {
      canonical = QString::fromStdString(editing::parse_subpopulation(text.toStdString()).text());
    } catch (const std::exception& e) {
      // Said where it was typed; the gallery stays as it was.
      subpopulation_->setStyleSheet(QStringLiteral("QLineEdit { color: #c62828; }"));
      subpopulation_->setToolTip(QString::fromUtf8(e.what()));
      return false;
    }
  }
  subpopulation_->setStyleSheet({});
  if (subpopulation_->text() != canonical) subpopulation_->setText(canonical);
  if (canonical == subpopulationText_) return true;
  subpopulationText_ = canonical;
  if (expert_ >= 0) Q_EMIT requestChanged();
  return true;
}

analysis::GalleryRequest GalleryView::request() const {
  analysis::GalleryRequest r;
  r.mode = mode_;
  r.expert = expert_;
  r.order = static_cast<analysis::GalleryOrder>(order_->currentData().toInt());
  r.threshold = threshold_->value();
  r.count = count_->value();
  r.seed = static_cast<uint64_t>(seed_->value());
  r.subpopulation = subpopulationText_.toStdString();
  return r;
}

void GalleryView::clear(const QString& message) {
  model_->clear();
  detail_->clear();
  title_->setText(message.isEmpty() ? tr("<i>Select an expert to see the samples that use it.</i>") : message);
}

void GalleryView::setGallery(const analysis::Gallery& gallery, const QStringList& classNames, const AnswerTiming& timing) {
  if (gallery.request.key() != request().key()) return;  // an answer to an older request
  model_->setGallery(gallery, classNames);
  detail_->clear();
  const QLocale locale;
  const QString rule = gallery.request.order == analysis::GalleryOrder::Random
                           ? tr("random draw (seed %1) among %2 samples with a ≥ %3")
                                 .arg(gallery.request.seed)
                                 .arg(locale.toString(qlonglong(gallery.eligible)))
                                 .arg(gallery.request.threshold)
                           : tr("the largest coefficients among %1 samples with a > 0")
                                 .arg(locale.toString(qlonglong(gallery.eligible)));
  int wrong = 0;
  for (const auto& item : gallery.items) wrong += item.label != item.prediction;
  const QString of = gallery.request.subpopulation.empty()
                         ? QString()
                         : tr(" of the subpopulation <b>%1</b>")
                               .arg(QString::fromStdString(gallery.request.subpopulation).toHtmlEscaped());
  title_->setText(tr("<b>Expert %1</b> · %2 samples: %3%4 · <span style='color:#c62828'>%5</span> "
                     "<span style='color:#666'>· %6</span>")
                      .arg(gallery.request.expert)
                      .arg(locale.toString(qlonglong(gallery.items.size())), rule, of)
                      .arg(gallery.multilabel ? tr("%1 with an output wrong").arg(wrong) : tr("%1 misclassified").arg(wrong))
                      .arg(timing.fromCache ? tr("cached, %1 ms").arg(timing.latencyMs, 0, 'f', 1)
                                            : tr("%1 ms").arg(timing.latencyMs, 0, 'f', 1)));
  if (gallery.items.empty())
    title_->setText(title_->text() + tr("<br><i>No sample reaches the threshold: try Top-ranked or a lower a.</i>"));
}

void GalleryView::activateRow(int row) {
  if (row < 0 || row >= model_->rowCount()) return;
  const QModelIndex index = model_->index(row);
  const qint64 sample = index.data(GalleryModel::SampleRole).toLongLong();
  const qint64 key = index.data(GalleryModel::ImageKeyRole).toLongLong();
  if (sample == detail_->sample() && key == detailKey_) return;
  detailKey_ = key;
  detail_->showSample(sample, store_ ? store_->image(key) : QImage(), index.data(GalleryModel::LabelNameRole).toString(),
                      index.data(GalleryModel::PredictionNameRole).toString(),
                      index.data(GalleryModel::CoefficientRole).toDouble(), expert_);
  Q_EMIT sampleActivated(sample);
}

void GalleryView::contextMenu(const QPoint& pos) {
  if (expert_ < 0) return;
  QMenu menu(this);
  menu.addAction(tr("Ablate Expert %1").arg(expert_), this, [this] { Q_EMIT ablateRequested(expert_); });
  menu.addAction(tr("Export Gallery…"), this, &GalleryView::exportRequested);
  menu.exec(list_->viewport()->mapToGlobal(pos));
}

}  // namespace mumoe::ui
