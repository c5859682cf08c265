// ModelComparisonPage: specialisation across models — the paper's "mean polysemanticity vs N"
// (its Fig. 3). The user adds model files (e.g. the expert-count sweep's heads, all on the same
// data SPEC); for each, on a worker thread, the page opens an AnalysisSession, extracts what the
// cache lacks, runs the full ablation sweep of the first expert mode (cached answers are read
// back) and adds a row: N, gate activation, accuracy, mean polysemanticity, experts with an
// effect. The chart plots mean polysemanticity against N (log axis), one line per gate
// activation (entmax15, softmax).
//
// Torch-free header.
#pragma once

#include <QString>
#include <QStringList>
#include <QVector>
#include <QWidget>

class QChart;
class QChartView;
class QLabel;
class QPushButton;
class QTableWidget;

namespace mumoe::ui {

class WorkerQueue;

/// One model's point of the comparison.
struct ComparedModel {
  QString path;
  qint64 experts = 0;          ///< N of the first expert mode
  QString activation;          ///< "entmax15" | "softmax"
  double accuracy = 0;         ///< of the unablated model on the data
  double meanPolysemanticity = 0;  ///< NaN when no removal changed any class accuracy
  qint64 expertsWithEffect = 0;
  double seconds = 0;          ///< open + extraction + sweep (or cache reads)
};

class ModelComparisonPage : public QWidget {
  Q_OBJECT

 public:
  explicit ModelComparisonPage(QWidget* parent = nullptr);
  ~ModelComparisonPage() override;

  /// Data SPEC and cache used for models added from now on ("" cache = the core's default).
  /// Another SPEC or cache clears the rows and drops the sweeps still queued.
  void setData(const QString& dataSpec, const QString& cachePath);
  /// Queues the models (one worker job each); rows appear as they finish.
  void addModels(const QStringList& paths);
  void clear();

  const QVector<ComparedModel>& models() const { return models_; }
  WorkerQueue* worker() const { return worker_; }
  QChartView* chartView() const { return view_; }

 Q_SIGNALS:
  void modelCompared(const mumoe::ui::ComparedModel& model);

 private:
  void chooseModels();
  void rebuild();

  WorkerQueue* worker_ = nullptr;
  QString dataSpec_ = QStringLiteral("fashion-mnist:test");
  QString cachePath_;
  QVector<ComparedModel> models_;
  QLabel* header_ = nullptr;
  QPushButton* add_ = nullptr;
  QPushButton* clear_ = nullptr;
  QTableWidget* table_ = nullptr;
  QChartView* view_ = nullptr;
  QChart* chart_ = nullptr;
};

}  // namespace mumoe::ui
