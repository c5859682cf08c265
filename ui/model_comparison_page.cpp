#include "model_comparison_page.h"

#include <QChart>
#include <QColor>
#include <QChartView>
#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QMap>
#include <QPushButton>
#include <QSplitter>
#include <QTableWidget>
#include <QValueAxis>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

#include "analysis/layer_comparison.h"
#include "chart_style.h"
#include "comparison_controller.h"
#include "worker_queue.h"

namespace mumoe::ui {
namespace {

/// The figures the chart can plot against N: what the combo box shows, and how to read a row.
struct ChartMetric {
  const char* label;
  const char* axis;
  double (*value)(const ComparedModel&);
  bool bounded_by_one;  ///< the axis stops at 1
};

const ChartMetric kMetrics[] = {
    {"Mean polysemanticity", "mean polysemanticity p (lower = more specialised)",
     [](const ComparedModel& m) { return m.mean_polysemanticity; }, true},
    {"Class purity", "mean class purity of each expert's samples",
     [](const ComparedModel& m) { return m.mean_class_purity; }, true},
    {"I(E;Y) / H(Y)", "share of the class entropy the strongest expert explains",
     [](const ComparedModel& m) { return m.information_ratio; }, true},
    {"Accuracy", "accuracy", [](const ComparedModel& m) { return m.accuracy; }, true},
    {"Load CV", "load coefficient of variation (0 = balanced)", [](const ComparedModel& m) { return m.load_cv; }, false},
    {"µs per sample", "measured time per sample (µs)",
     [](const ComparedModel& m) { return m.microseconds_per_sample; }, false},
};

/// Ten distinguishable colours (Tableau 10): a chart of μMoE and all six routers has eight
/// lines, more than the chart theme's palette tells apart.
const QColor kSeriesColours[] = {QColor(0x4e, 0x79, 0xa7), QColor(0xf2, 0x8e, 0x2b), QColor(0xe1, 0x57, 0x59),
                                 QColor(0x76, 0xb7, 0xb2), QColor(0x59, 0xa1, 0x4f), QColor(0xed, 0xc9, 0x48),
                                 QColor(0xb0, 0x7a, 0xa1), QColor(0xff, 0x9d, 0xa7), QColor(0x9c, 0x75, 0x5f),
                                 QColor(0xba, 0xb0, 0xac)};

QString figure(double v, int precision) { return std::isfinite(v) ? QString::number(v, 'f', precision) : QStringLiteral("—"); }

}  // namespace

QString seriesName(const ComparedModel& m) {
  const auto family = QString::fromStdString(m.family);
  return family.startsWith(QStringLiteral("μMoE")) ? family + QLatin1Char(' ') + QString::fromStdString(m.gate) : family;
}

ModelComparisonPage::ModelComparisonPage(QWidget* parent) : QWidget(parent) {
  controller_ = new ComparisonController(this);
  connect(controller_, &ComparisonController::compared, this, [this](const ComparedModel& row) {
    models_.push_back(row);
    std::stable_sort(models_.begin(), models_.end(), [](const ComparedModel& a, const ComparedModel& b) {
      const auto sa = seriesName(a), sb = seriesName(b);
      return sa != sb ? sa < sb : a.experts < b.experts;
    });
    rebuild();
    Q_EMIT modelCompared(row);
  });
  header_ = new QLabel;
  header_->setWordWrap(true);
  add_ = new QPushButton(tr("Add Models…"));
  clear_ = new QPushButton(tr("Clear"));
  connect(add_, &QPushButton::clicked, this, &ModelComparisonPage::chooseModels);
  connect(clear_, &QPushButton::clicked, this, &ModelComparisonPage::clear);

  table_ = new QTableWidget(0, 14);
  table_->setHorizontalHeaderLabels({tr("Model"), tr("Layer"), tr("N"), tr("Parameters"), tr("Accuracy"),
                                     tr("Mean polysemanticity"), tr("Experts with effect"), tr("Class purity"),
                                     tr("I(E;Y)/H(Y)"), tr("Load CV"), tr("Dead"), tr("Dropped"),
                                     tr("kFLOPs/sample"), tr("µs/sample")});
  metric_ = new QComboBox;
  for (const auto& m : kMetrics) metric_->addItem(tr(m.label));
  connect(metric_, &QComboBox::currentIndexChanged, this, &ModelComparisonPage::rebuildChart);
  // The file name takes what the numbers leave; the numeric columns keep their headers readable.
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
  table_->verticalHeader()->hide();
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);

  chart_ = new QChart;
  chart_->setTitle(tr("Mean polysemanticity vs number of experts"));
  chart_->setTitle(tr("Mean polysemanticity vs number of experts (paper Fig. 3)"));
  view_ = new QChartView(chart_);
  view_->setRenderHint(QPainter::Antialiasing);
  view_->setMinimumHeight(260);

  auto* buttons = new QHBoxLayout;
  buttons->addWidget(add_);
  buttons->addWidget(clear_);
  layer_ = new QLineEdit;
  layer_->setPlaceholderText(tr("each model's only layer"));
  layer_->setToolTip(tr("The layer compared in every model: empty for a head, blocks.L.mlp for a ViT block's MLP"));
  layer_->setMaximumWidth(220);
  connect(layer_, &QLineEdit::editingFinished, this, [this] {
    if (layer_->text() != layerInUse_) setLayer(layer_->text());
  });
  buttons->addWidget(new QLabel(tr("Layer:")));
  buttons->addWidget(layer_);
  buttons->addStretch();
  buttons->addWidget(new QLabel(tr("Chart:")));
  buttons->addWidget(metric_);
  auto* splitter = new QSplitter(Qt::Vertical);
  splitter->addWidget(table_);
  splitter->addWidget(view_);
  // Room for a dozen rows and a readable chart; the user moves the handle for more of either.
  splitter->setStretchFactor(0, 2);
  splitter->setStretchFactor(1, 3);
  splitter->setSizes({320, 480});
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(header_);
  layout->addLayout(buttons);
  layout->addWidget(splitter, 1);
  setData(dataSpec_, cachePath_);
  rebuild();
}

ModelComparisonPage::~ModelComparisonPage() {
  // The controller (a child) outlives the rows: nothing it still answers may reach this page.
  disconnect(controller_, nullptr, this, nullptr);
}

WorkerQueue* ModelComparisonPage::worker() const { return controller_->worker(); }

void ModelComparisonPage::setData(const QString& dataSpec, const QString& cachePath) {
  // Rows are only comparable on one data set: another one starts the comparison afresh.
  if ((dataSpec != dataSpec_ || cachePath != cachePath_) && (!models_.isEmpty() || worker()->pending() > 0)) clear();
  dataSpec_ = dataSpec;
  cachePath_ = cachePath;
  header_->setText(tr("<b>Specialisation across models</b> · every model is swept (each expert of its first mode "
                      "removed in turn) on <code>%1</code>; cached sweeps are read back. Add μMoE heads "
                      "(<code>scripts/sweep-experts.sh</code>) and sparse or soft MoE heads "
                      "(<code>mumoe train --router</code>) to see which experts specialise as N grows — the "
                      "same rows as <code>mumoe compare</code>.")
                       .arg(dataSpec_.toHtmlEscaped()));
}

void ModelComparisonPage::setLayer(const QString& layer) {
  if (layer != layerInUse_ && (!models_.isEmpty() || worker()->pending() > 0)) clear();
  layerInUse_ = layer;
  if (layer_->text() != layer) layer_->setText(layer);
}

QString ModelComparisonPage::layer() const { return layerInUse_; }

void ModelComparisonPage::chooseModels() {
  const auto paths = QFileDialog::getOpenFileNames(this, tr("Models to compare"), QString(),
                                                   tr("Model files (*.safetensors *.pth *.pt);;All files (*)"));
  if (!paths.isEmpty()) addModels(paths);
}

void ModelComparisonPage::addModels(const QStringList& paths) {
  for (const auto& path : paths) controller_->compare(path, dataSpec_, cachePath_, layerInUse_);
}

void ModelComparisonPage::clear() {
  controller_->clear();
  models_.clear();
  rebuild();
}

void ModelComparisonPage::rebuild() {
  table_->setRowCount(static_cast<int>(models_.size()));
  for (int r = 0; r < models_.size(); ++r) {
    const auto& m = models_[r];
    int column = 0;
    auto put = [&](const QString& text, bool right = true) {
      auto* i = new QTableWidgetItem(text);
      if (right) i->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      table_->setItem(r, column++, i);
      return i;
    };
    put(QFileInfo(QString::fromStdString(m.model_path)).fileName(), false)
        ->setToolTip(QString::fromStdString(m.model_path));
    put(seriesName(m), false);
    put(QString::number(m.experts));
    put(QString::number(m.parameters));
    put(QStringLiteral("%1 %").arg(100 * m.accuracy, 0, 'f', 2));
    put(figure(m.mean_polysemanticity, 4));
    put(QStringLiteral("%1 of %2").arg(m.experts_with_effect).arg(m.experts));
    put(figure(m.mean_class_purity, 3));
    put(figure(m.information_ratio, 3));
    put(figure(m.load_cv, 2));
    put(QString::number(m.dead_experts));
    put(QString::number(m.dropped_tokens));
    put(figure(2 * m.multiply_adds_per_sample / 1000, 1));
    put(figure(m.microseconds_per_sample, 2));
  }
  rebuildChart();
}

void ModelComparisonPage::rebuildChart() {
  const auto& metric = kMetrics[std::max(0, metric_->currentIndex())];
  chart_->removeAllSeries();
  for (auto* axis : chart_->axes()) {
    chart_->removeAxis(axis);
    delete axis;
  }
  QMap<QString, QLineSeries*> lines;
  double lowest = std::numeric_limits<double>::infinity(), highest = -lowest;
  int64_t nMin = 0, nMax = 0;
  for (const auto& m : models_) {
    const double value = metric.value(m);
    if (!std::isfinite(value)) continue;
    auto*& line = lines[seriesName(m)];
    if (!line) {
      line = new QLineSeries;
      line->setName(seriesName(m));
      line->setPointsVisible(true);
    }
    line->append(static_cast<double>(m.experts), value);
    lowest = std::min(lowest, value);
    highest = std::max(highest, value);
    nMin = nMin == 0 ? m.experts : std::min(nMin, m.experts);
    nMax = std::max(nMax, m.experts);
  }
  if (lines.isEmpty()) {
    chart_->setTitle(tr("%1 vs number of experts — add models to compare").arg(tr(metric.label)));
    return;
  }
  chart_->setTitle(tr("%1 vs number of experts").arg(tr(metric.label)));
  auto* x = new QLogValueAxis;
  x->setBase(2);
  x->setLabelFormat(QStringLiteral("%d"));
  x->setTitleText(tr("experts N (log scale)"));
  x->setRange(std::max<double>(1, nMin / 1.5), nMax * 1.5);
  auto* y = new QValueAxis;
  y->setTitleText(tr(metric.axis));
  // Ticks at round values (1, 2 or 5 × 10^k apart); the axis stops at 1, polysemanticity's bound.
  const double pad = std::max(0.005, (highest - lowest) * 0.2);
  const double raw = std::max(1e-4, (highest - lowest + 2 * pad) / 5);
  const double decade = std::pow(10.0, std::floor(std::log10(raw)));
  const double step = raw / decade <= 1 ? decade : raw / decade <= 2 ? 2 * decade : raw / decade <= 5 ? 5 * decade : 10 * decade;
  const double ceiling = std::ceil((highest + pad) / step) * step;
  const double top = metric.bounded_by_one ? std::min(1.0, ceiling) : ceiling;
  const double bottom = std::max(0.0, std::floor((lowest - pad) / step) * step);
  y->setRange(bottom, top);
  y->setTickType(QValueAxis::TicksDynamic);
  y->setTickAnchor(0.0);
  y->setTickInterval(step);
  y->setLabelFormat(step < 0.01 ? QStringLiteral("%.3f") : QStringLiteral("%.2f"));
  chart_->addAxis(x, Qt::AlignBottom);
  chart_->addAxis(y, Qt::AlignLeft);
  int colour = 0;
  for (auto* line : lines) {
    line->setColor(kSeriesColours[colour++ % std::size(kSeriesColours)]);
    chart_->addSeries(line);
    line->attachAxis(x);
    line->attachAxis(y);
  }
  styleAxes(chart_);
}

}  // namespace mumoe::ui
