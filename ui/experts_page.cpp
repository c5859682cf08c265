#include "experts_page.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QMenu>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

#include <algorithm>

#include "controls.h"
#include "expert_table_model.h"
#include "gallery_view.h"
#include "session_controller.h"

namespace mumoe::ui {

ExpertsPage::ExpertsPage(ThumbnailStore* store, QWidget* parent) : QWidget(parent) {
  layer_ = new QComboBox;
  layer_->setToolTip(tr("μMoE layer whose experts are shown (picking another analyses it)"));
  layer_->setVisible(false);
  mode_ = new QComboBox;
  mode_->setToolTip(tr("Expert mode (hierarchical layers have several)"));
  threshold_ = makeThresholdBox(0.01, tr("load: a ≥ "));
  threshold_->setToolTip(tr("A sample counts towards an expert's load when its coefficient reaches this"));
  filter_ = new QLineEdit;
  filter_->setPlaceholderText(tr("Filter: class name or expert number"));
  filter_->setClearButtonEnabled(true);
  hideDead_ = new QCheckBox(tr("Hide dead"));
  hideDead_->setToolTip(tr("Hide experts whose load is zero"));
  summary_ = new QLabel;
  summary_->setTextFormat(Qt::RichText);
  summary_->setWordWrap(true);

  auto* bar = new QHBoxLayout;
  bar->setContentsMargins(0, 0, 0, 0);
  bar->addWidget(layer_);
  bar->addWidget(mode_);
  bar->addWidget(threshold_);
  bar->addWidget(filter_, 1);
  bar->addWidget(hideDead_);

  model_ = new ExpertTableModel(this);
  proxy_ = new ExpertFilterProxy(this);
  proxy_->setSourceModel(model_);
  table_ = new QTableView;
  table_->setModel(proxy_);
  table_->setSortingEnabled(true);
  table_->sortByColumn(ExpertTableModel::Load, Qt::DescendingOrder);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  table_->setAlternatingRowColors(true);
  table_->setWordWrap(false);
  table_->verticalHeader()->hide();
  table_->verticalHeader()->setDefaultSectionSize(table_->fontMetrics().height() + 6);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setSectionResizeMode(ExpertTableModel::TopClasses, QHeaderView::Stretch);
  table_->horizontalHeader()->setHighlightSections(false);
  table_->setContextMenuPolicy(Qt::CustomContextMenu);
  table_->setToolTip(tr("Double-click an expert to ablate it; select several and press Ctrl+Return to ablate them together"));

  auto* left = new QWidget;
  auto* leftLayout = new QVBoxLayout(left);
  leftLayout->setContentsMargins(0, 0, 0, 0);
  leftLayout->addLayout(bar);
  leftLayout->addWidget(summary_);
  leftLayout->addWidget(table_, 1);

  gallery_ = new GalleryView(store);
  splitter_ = makeSplitter(Qt::Horizontal, QStringLiteral("expertsSplitter"), left, gallery_, 2, 3);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addWidget(splitter_);

  // Filtering keeps the selected expert when it stays visible, else selects the first one shown:
  // the gallery always shows the highlighted row's expert (it used to show one no row named).
  connect(filter_, &QLineEdit::textChanged, this, [this](const QString& text) {
    const qint64 before = currentExpert();
    proxy_->setFilterText(text);
    reselectAfterFilter(before);
  });
  connect(hideDead_, &QCheckBox::toggled, this, [this](bool hide) {
    const qint64 before = currentExpert();
    proxy_->setHideDead(hide);
    reselectAfterFilter(before);
  });
  connect(mode_, &QComboBox::activated, this, [this] { Q_EMIT statisticsWanted(mode(), threshold()); });
  connect(layer_, &QComboBox::activated, this, [this] {
    // Compared with the last layer asked for, not the last one opened: after a failed or
    // cancelled open, picking the previous layer again must reopen it.
    if (layer() == requestedLayer_) return;
    requestedLayer_ = layer();
    Q_EMIT layerWanted(requestedLayer_);
  });
  connect(threshold_, &QDoubleSpinBox::editingFinished, this, [this] {
    if (model_->rowCount() > 0 && threshold() != model_->statistics().threshold) Q_EMIT statisticsWanted(mode(), threshold());
  });
  connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this] {
    const qint64 expert = currentExpert();
    gallery_->setExpert(mode(), expert);
    Q_EMIT currentExpertChanged(expert);
  });
  connect(table_, &QTableView::doubleClicked, this, [this](const QModelIndex& index) {
    Q_EMIT ablateRequested({index.data(ExpertTableModel::ExpertRole).toLongLong()});
  });
  connect(table_, &QWidget::customContextMenuRequested, this, &ExpertsPage::contextMenu);
  connect(gallery_, &GalleryView::ablateRequested, this, [this](qint64 expert) { Q_EMIT ablateRequested({expert}); });
  connect(gallery_, &GalleryView::expertChosen, this, [this](qint64 expert) { selectExpert(expert); });
  connect(proxy_, &QAbstractItemModel::modelReset, this, [this] { updateSummary(); });
  connect(proxy_, &QAbstractItemModel::rowsInserted, this, [this] { updateSummary(); });
  connect(proxy_, &QAbstractItemModel::rowsRemoved, this, [this] { updateSummary(); });
  clear();
}

void ExpertsPage::setSession(const SessionInfo& info, const QStringList& layers) {
  classNames_ = info.classNames;
  requestedLayer_ = info.layer;
  imagesByPatch_ = info.patchGrid > 0;
  imagesByChannel_ = imagesByPatch_ && !info.rowsArePatches;
  layer_->clear();
  for (const QString& name : layers) layer_->addItem(tr("Layer %1").arg(name), name);
  layer_->setCurrentIndex(std::max(0, layer_->findData(info.layer)));
  layer_->setVisible(layers.size() > 1);
  mode_->clear();
  for (int m = 0; m < info.expertDims.size(); ++m)
    mode_->addItem(tr("Mode %1 · %2 experts").arg(m).arg(info.expertDims[m]), m);
  mode_->setVisible(info.expertDims.size() > 1);
  model_->clear();
  gallery_->setExpert(0, -1);
  gallery_->setAttributes(info.attributeNames);
}

void ExpertsPage::setStatistics(const analysis::ModeStatistics& statistics) {
  const qint64 previous = currentExpert();
  model_->setStatistics(statistics, classNames_);
  threshold_->setValue(statistics.threshold);
  if (mode_->currentIndex() != statistics.mode) mode_->setCurrentIndex(static_cast<int>(statistics.mode));
  updateSummary();
  if (previous >= 0) selectExpert(previous);
  else gallery_->setExpert(statistics.mode, -1);
}

void ExpertsPage::setSweep(const analysis::SweepOutcome& sweep, const analysis::ClassAccuracy& before) {
  model_->setSweep(sweep, before);
}

void ExpertsPage::setMessage(const QString& html) { summary_->setText(html); }

QString ExpertsPage::message() const { return summary_->text(); }

void ExpertsPage::clear() {
  model_->clear();
  gallery_->setExpert(0, -1);
  // The previous model's pickers go with it: a model with nothing to pick shows none.
  layer_->clear();
  layer_->setVisible(false);
  mode_->clear();
  mode_->setVisible(false);
  summary_->setText(tr("<i>Open a model to browse its experts.</i>"));
}

void ExpertsPage::updateSummary() {
  const auto& s = model_->statistics();
  if (s.experts.empty()) return;
  const QLocale locale;
  summary_->setText((s.multilabel ? tr("<b>%1 experts</b> · %2 dead at a ≥ %3 · %4 active per sample · "
                                       "mean I(E;Y<sub>o</sub>) over outputs = %5 bits · %6 shown")
                                  : tr("<b>%1 experts</b> · %2 dead at a ≥ %3 · %4 active per sample · "
                                       "I(E;Y) = %5 bits · %6 shown"))
                        .arg(s.experts.size())
                        .arg(s.dead_experts)
                        .arg(s.threshold)
                        .arg(locale.toString(s.mean_active_experts, 'f', 1), locale.toString(s.mutual_information_bits, 'f', 2))
                        .arg(proxy_->rowCount()) +
                    (imagesByChannel_ ? tr("<br>Token-mixing layer: an image counts by its strongest channel for the "
                                           "expert (a channel is no place in the image: nothing is outlined)")
                     : imagesByPatch_ ? tr("<br>Backbone layer: an image counts by its strongest patch for the expert "
                                           "(outlined in the gallery)")
                                      : QString()));
}

void ExpertsPage::reselectAfterFilter(qint64 expert) {
  const int sourceRow = expert >= 0 ? model_->rowOfExpert(expert) : -1;
  QModelIndex index = sourceRow >= 0 ? proxy_->mapFromSource(model_->index(sourceRow, 0)) : QModelIndex();
  // The first row shown stands in only for an expert the filter hid, not for no selection.
  if (!index.isValid() && expert >= 0 && proxy_->rowCount() > 0) index = proxy_->index(0, 0);
  auto* selection = table_->selectionModel();
  if (index.isValid()) {
    selection->setCurrentIndex(index, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    table_->scrollTo(index);
  } else {
    selection->clear();
  }
  gallery_->setExpert(mode(), currentExpert());  // a no-op when the current row's signal did it
}

qint64 ExpertsPage::mode() const { return std::max(0, mode_->currentIndex()); }
QString ExpertsPage::layer() const { return layer_->currentData().toString(); }
double ExpertsPage::threshold() const { return threshold_->value(); }

qint64 ExpertsPage::currentExpert() const {
  const QModelIndex index = table_->currentIndex();
  return index.isValid() ? index.data(ExpertTableModel::ExpertRole).toLongLong() : -1;
}

QVector<qint64> ExpertsPage::selectedExperts() const {
  QVector<qint64> out;
  for (const QModelIndex& index : table_->selectionModel()->selectedRows())
    out << index.data(ExpertTableModel::ExpertRole).toLongLong();
  if (out.isEmpty() && currentExpert() >= 0) out << currentExpert();
  std::sort(out.begin(), out.end());
  return out;
}

bool ExpertsPage::selectExpert(qint64 expert) {
  const int sourceRow = model_->rowOfExpert(expert);
  if (sourceRow < 0) return false;
  QModelIndex index = proxy_->mapFromSource(model_->index(sourceRow, 0));
  if (!index.isValid()) {
    filter_->clear();
    proxy_->setHideDead(false);
    hideDead_->setChecked(false);
    index = proxy_->mapFromSource(model_->index(sourceRow, 0));
  }
  if (!index.isValid()) return false;
  table_->setCurrentIndex(index);
  table_->selectRow(index.row());
  table_->scrollTo(index);
  gallery_->setExpert(mode(), expert);
  return true;
}

void ExpertsPage::contextMenu(const QPoint& pos) {
  const QModelIndex at = table_->indexAt(pos);
  if (!at.isValid()) return;
  const qint64 expert = at.data(ExpertTableModel::ExpertRole).toLongLong();
  const auto selected = selectedExperts();
  QMenu menu(this);
  menu.addAction(tr("Ablate Expert %1").arg(expert), this, [this, expert] { Q_EMIT ablateRequested({expert}); });
  if (selected.size() > 1)
    menu.addAction(tr("Ablate %n Selected Experts Together", nullptr, static_cast<int>(selected.size())), this,
                   [this, selected] { Q_EMIT ablateRequested(selected); });
  menu.addSeparator();
  menu.addAction(tr("Show Top-Ranked Samples"), this, [this, expert] {
    selectExpert(expert);
    gallery_->setOrder(analysis::GalleryOrder::Top);
  });
  menu.exec(table_->viewport()->mapToGlobal(pos));
}

}  // namespace mumoe::ui
