#include "sample_detail.h"

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QLabel>
#include <QStackedBarSeries>
#include <QVBoxLayout>
#include <QValueAxis>

#include "chart_style.h"
#include "thumbnail_store.h"

namespace mumoe::ui {

constexpr int kImageSide = 196;
constexpr int kMinWidth = 250;

SampleDetail::SampleDetail(QWidget* parent) : QWidget(parent) {
  image_ = new QLabel;
  image_->setFixedSize(kImageSide, kImageSide);
  image_->setAlignment(Qt::AlignCenter);
  image_->setStyleSheet(QStringLiteral("background:#1e1e1e;color:#888"));
  text_ = new QLabel;
  text_->setWordWrap(true);
  text_->setTextFormat(Qt::RichText);
  chart_ = new QChart;
  styleChart(chart_);
  chart_->legend()->hide();
  view_ = new QChartView(chart_);
  view_->setRenderHint(QPainter::Antialiasing);
  view_->setMinimumHeight(170);
  setMinimumWidth(kMinWidth);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 0, 0, 0);
  layout->addWidget(image_, 0, Qt::AlignHCenter);
  layout->addWidget(text_);
  layout->addWidget(view_, 1);
  clear();
}

void SampleDetail::clear() {
  sample_ = -1;
  bars_.clear();
  image_->clear();
  image_->setText(tr("Click a sample"));
  text_->setText(QString());
  chart_->removeAllSeries();
  for (auto* axis : chart_->axes()) chart_->removeAxis(axis);
  chart_->setTitle(tr("Coefficients"));
}

void SampleDetail::setImage(const QImage& image) {
  if (image.isNull()) {
    image_->setText(tr("no image"));
    return;
  }
  image_->setPixmap(QPixmap::fromImage(scaleForThumbnail(image, kImageSide)));
}

void SampleDetail::showSample(qint64 sample, const QImage& image, const QString& label, const QString& prediction,
                              double coefficient, qint64 expert) {
  clear();
  sample_ = sample;
  expert_ = expert;
  setImage(image);
  const bool correct = label == prediction;
  text_->setText(tr("<b>Sample %1</b><br>label <b>%2</b> · predicted <b style='color:%3'>%4</b><br>"
                    "a<sub>%5</sub> = <span style='color:#2e7d32'><b>%6</b></span>")
                     .arg(sample)
                     .arg(label.toHtmlEscaped(), correct ? QStringLiteral("#2e7d32") : QStringLiteral("#c62828"),
                          prediction.toHtmlEscaped())
                     .arg(expert)
                     .arg(coefficient, 0, 'f', 4));
  chart_->setTitle(tr("Coefficients (loading…)"));
}

void SampleDetail::setCoefficients(qint64 sample, const QVector<double>& coefficients) {
  if (sample != sample_) return;
  chart_->removeAllSeries();
  for (auto* axis : chart_->axes()) chart_->removeAxis(axis);
  bars_.clear();
  auto* others = makeBarSet(tr("a_n"), QColor(0x90, 0xa4, 0xae));
  auto* mine = makeBarSet(tr("this expert"), QColor(0x2e, 0x7d, 0x32));
  QStringList categories;
  for (int n = 0; n < coefficients.size(); ++n) {
    if (coefficients[n] <= 0) continue;
    bars_.append({n, coefficients[n]});
    categories << QString::number(n);
    *others << (n == expert_ ? 0.0 : coefficients[n]);
    *mine << (n == expert_ ? coefficients[n] : 0.0);
  }
  auto* series = new QStackedBarSeries;
  series->append(others);
  series->append(mine);
  series->setBarWidth(0.8);
  connect(series, &QAbstractBarSeries::clicked, this, [this](int index, QBarSet*) {
    if (index >= 0 && index < bars_.size()) Q_EMIT expertClicked(bars_[index].first);
  });
  chart_->addSeries(series);
  view_->setToolTip(tr("Click a bar to open that expert"));
  auto* x = new QBarCategoryAxis;
  x->append(categories);
  // Many bars: the expert numbers stand upright, whole (Qt elides a label wider than its bar to
  // "…", which named no expert).
  if (categories.size() > 8) x->setLabelsAngle(-90);
  x->setTruncateLabels(false);
  auto* y = new QValueAxis;
  y->setRange(0, 1);
  y->setTickCount(3);
  y->setLabelFormat(QStringLiteral("%.1f"));
  chart_->addAxis(x, Qt::AlignBottom);
  chart_->addAxis(y, Qt::AlignLeft);
  series->attachAxis(x);
  series->attachAxis(y);
  styleAxes(chart_);
  chart_->setTitle(tr("%n active expert(s) of %1", nullptr, static_cast<int>(bars_.size())).arg(coefficients.size()));
}

}  // namespace mumoe::ui
