#include "model_comparison_page.h"

#include <QChart>
#include <QChartView>
#include <QElapsedTimer>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QMap>
#include <QPushButton>
#include <QScatterSeries>
#include <QSplitter>
#include <QTableWidget>
#include <QValueAxis>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

#include "analysis/analysis_session.h"
#include "chart_style.h"
#include "model/model_summary.h"
#include "nn/layer_config.h"
#include "worker_queue.h"

namespace mumoe::ui {

ModelComparisonPage::ModelComparisonPage(QWidget* parent) : QWidget(parent) {
  worker_ = new WorkerQueue(this);
  header_ = new QLabel;
  header_->setWordWrap(true);
  add_ = new QPushButton(tr("Add Models…"));
  clear_ = new QPushButton(tr("Clear"));
  connect(add_, &QPushButton::clicked, this, &ModelComparisonPage::chooseModels);
  connect(clear_, &QPushButton::clicked, this, &ModelComparisonPage::clear);

  table_ = new QTableWidget(0, 6);
  table_->setHorizontalHeaderLabels(
      {tr("Model"), tr("N"), tr("Gate"), tr("Accuracy"), tr("Mean polysemanticity"), tr("Experts with effect")});
  // The file name takes what the numbers leave; the numeric columns keep their headers readable.
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
  table_->verticalHeader()->hide();
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);

  chart_ = new QChart;
  styleChart(chart_);
  chart_->setTitle(tr("Mean polysemanticity vs number of experts (paper Fig. 3)"));
  view_ = new QChartView(chart_);
  view_->setRenderHint(QPainter::Antialiasing);
  view_->setMinimumHeight(260);

  auto* buttons = new QHBoxLayout;
  buttons->addWidget(add_);
  buttons->addWidget(clear_);
  buttons->addStretch();
  auto* splitter = new QSplitter(Qt::Vertical);
  splitter->addWidget(table_);
  splitter->addWidget(view_);
  splitter->setStretchFactor(1, 2);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(header_);
  layout->addLayout(buttons);
  layout->addWidget(splitter, 1);
  setData(dataSpec_, cachePath_);
  rebuild();
}

ModelComparisonPage::~ModelComparisonPage() = default;

void ModelComparisonPage::setData(const QString& dataSpec, const QString& cachePath) {
  // Rows are only comparable on one data set: another one starts the comparison afresh.
  if ((dataSpec != dataSpec_ || cachePath != cachePath_) && (!models_.isEmpty() || worker_->pending() > 0)) clear();
  dataSpec_ = dataSpec;
  cachePath_ = cachePath;
  header_->setText(tr("<b>Specialisation across models</b> · every model is swept (each expert of its first mode "
                      "removed in turn) on <code>%1</code>; cached sweeps are read back. Add the heads of an "
                      "expert-count sweep (<code>scripts/sweep-experts.sh</code>) to see whether polysemanticity "
                      "falls as N grows.")
                       .arg(dataSpec_.toHtmlEscaped()));
}

void ModelComparisonPage::chooseModels() {
  const auto paths = QFileDialog::getOpenFileNames(this, tr("Models to compare"), QString(),
                                                   tr("Model files (*.safetensors *.pth *.pt);;All files (*)"));
  if (!paths.isEmpty()) addModels(paths);
}

void ModelComparisonPage::addModels(const QStringList& paths) {
  for (const auto& path : paths) {
    const QString data = dataSpec_, cache = cachePath_;
    WorkerQueue* worker = worker_;
    worker_->submit(tr("compare %1").arg(QFileInfo(path).fileName()),
                    [this, path, data, cache, worker](const std::function<bool()>& cancelled) -> WorkerQueue::Deliver {
                      QElapsedTimer timer;
                      timer.start();
                      analysis::SessionOptions o;
                      o.model_path = path.toStdString();
                      o.data_spec = data.toStdString();
                      o.cache_path = cache.toStdString();
                      const QString task = tr("compare %1").arg(QFileInfo(path).fileName());
                      auto session = analysis::AnalysisSession::open_extracted(
                          o, [&](const analysis::ExtractionProgress& p) {
                            worker->postProgress(task, p.samples_done, p.samples_total, p.eta_seconds);
                            return !cancelled();
                          });
                      const auto sweep = session->sweep(0, analysis::AblationMethod::Sparse,
                                                        [&](int64_t done, int64_t total) {
                                                          worker->postProgress(task, done, total);
                                                          return !cancelled();
                                                        });
                      ComparedModel m;
                      m.path = path;
                      m.experts = session->expert_dims().at(0);
                      m.accuracy = session->accuracy().overall;
                      m.meanPolysemanticity = sweep.value.mean_polysemanticity;
                      m.expertsWithEffect = sweep.value.experts_with_effect;
                      // The gate activation from the file's summary (torch-free; no tensor data read).
                      for (const auto& l : model::summarize_model_file(path.toStdString()).layers)
                        if (l.name == session->layer_name())
                          m.activation = QString::fromStdString(nn::to_string(l.config.gate_activation));
                      m.seconds = timer.elapsed() / 1000.0;
                      return [this, m](double) {
                        models_.push_back(m);
                        std::sort(models_.begin(), models_.end(), [](const ComparedModel& a, const ComparedModel& b) {
                          return a.activation != b.activation ? a.activation < b.activation : a.experts < b.experts;
                        });
                        rebuild();
                        Q_EMIT modelCompared(m);
                      };
                    });
  }
}

void ModelComparisonPage::clear() {
  worker_->cancel();
  worker_->invalidate();
  models_.clear();
  rebuild();
}

void ModelComparisonPage::rebuild() {
  table_->setRowCount(static_cast<int>(models_.size()));
  for (int r = 0; r < models_.size(); ++r) {
    const auto& m = models_[r];
    auto item = [](const QString& text, bool right) {
      auto* i = new QTableWidgetItem(text);
      if (right) i->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      return i;
    };
    table_->setItem(r, 0, item(QFileInfo(m.path).fileName(), false));
    table_->item(r, 0)->setToolTip(m.path);
    table_->setItem(r, 1, item(QString::number(m.experts), true));
    table_->setItem(r, 2, item(m.activation, false));
    table_->setItem(r, 3, item(QStringLiteral("%1 %").arg(100 * m.accuracy, 0, 'f', 2), true));
    table_->setItem(r, 4, item(std::isnan(m.meanPolysemanticity) ? QStringLiteral("—")
                                                                  : QString::number(m.meanPolysemanticity, 'f', 4),
                               true));
    table_->setItem(r, 5, item(QStringLiteral("%1 of %2").arg(m.expertsWithEffect).arg(m.experts), true));
  }

  chart_->removeAllSeries();
  for (auto* axis : chart_->axes()) {
    chart_->removeAxis(axis);
    delete axis;
  }
  QMap<QString, QLineSeries*> lines;
  double lowest = 1, highest = 0;
  qint64 nMin = 0, nMax = 0;
  for (const auto& m : models_) {
    if (std::isnan(m.meanPolysemanticity)) continue;
    auto*& line = lines[m.activation];
    if (!line) {
      line = new QLineSeries;
      line->setName(m.activation);
      line->setPointsVisible(true);
    }
    line->append(static_cast<double>(m.experts), m.meanPolysemanticity);
    lowest = std::min(lowest, m.meanPolysemanticity);
    highest = std::max(highest, m.meanPolysemanticity);
    nMin = nMin == 0 ? m.experts : std::min(nMin, m.experts);
    nMax = std::max(nMax, m.experts);
  }
  if (lines.isEmpty()) {
    chart_->setTitle(tr("Mean polysemanticity vs number of experts — add models to compare"));
    return;
  }
  chart_->setTitle(tr("Mean polysemanticity vs number of experts (paper Fig. 3)"));
  auto* x = new QLogValueAxis;
  x->setBase(2);
  x->setLabelFormat(QStringLiteral("%d"));
  x->setTitleText(tr("experts N (log scale)"));
  x->setRange(std::max<double>(1, nMin / 1.5), nMax * 1.5);
  auto* y = new QValueAxis;
  y->setTitleText(tr("mean polysemanticity p (lower = more specialised)"));
  // Ticks at round values (1, 2 or 5 × 10^k apart); the axis stops at 1, polysemanticity's bound.
  const double pad = std::max(0.005, (highest - lowest) * 0.2);
  const double raw = std::max(1e-4, (highest - lowest + 2 * pad) / 5);
  const double decade = std::pow(10.0, std::floor(std::log10(raw)));
  const double step = raw / decade <= 1 ? decade : raw / decade <= 2 ? 2 * decade : raw / decade <= 5 ? 5 * decade : 10 * decade;
  const double top = std::min(1.0, std::ceil((highest + pad) / step) * step);
  const double bottom = std::max(0.0, std::floor((lowest - pad) / step) * step);
  y->setRange(bottom, top);
  y->setTickType(QValueAxis::TicksDynamic);
  y->setTickAnchor(0.0);
  y->setTickInterval(step);
  y->setLabelFormat(step < 0.01 ? QStringLiteral("%.3f") : QStringLiteral("%.2f"));
  chart_->addAxis(x, Qt::AlignBottom);
  chart_->addAxis(y, Qt::AlignLeft);
  for (auto* line : lines) {
    chart_->addSeries(line);
    line->attachAxis(x);
    line->attachAxis(y);
  }
  styleAxes(chart_);
}

}  // namespace mumoe::ui
