// SampleDetail: one gallery sample enlarged — the image at a readable size, its label,
// prediction and coefficient, and its full coefficient vector as a small bar chart (the experts
// with a_n > 0; the gallery's expert highlighted). Clicking a bar opens that expert.
#pragma once

#include <QImage>
#include <QStringList>
#include <QVector>
#include <QWidget>

class QChart;
class QChartView;
class QLabel;

namespace mumoe::ui {

class SampleDetail : public QWidget {
  Q_OBJECT

 public:
  explicit SampleDetail(QWidget* parent = nullptr);

  /// Shows a sample (image may be null: "no image"); the coefficients follow separately.
  void showSample(qint64 sample, const QImage& image, const QString& label, const QString& prediction,
                  double coefficient, qint64 expert);
  void setImage(const QImage& image);
  /// The dense coefficient vector of the sample shown (ignored for another sample).
  void setCoefficients(qint64 sample, const QVector<double>& coefficients);
  void clear();
  qint64 sample() const { return sample_; }
  /// (expert, a_n) of the bars shown.
  QVector<QPair<qint64, double>> bars() const { return bars_; }
  QChartView* chartView() const { return view_; }

 Q_SIGNALS:
  /// A bar of the coefficient chart was clicked: open that expert.
  void expertClicked(qint64 expert);

 private:
  QLabel* image_ = nullptr;
  QLabel* text_ = nullptr;
  QChartView* view_ = nullptr;
  QChart* chart_ = nullptr;
  qint64 sample_ = -1;
  qint64 expert_ = -1;
  QVector<QPair<qint64, double>> bars_;
};

}  // namespace mumoe::ui
