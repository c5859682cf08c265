// ModelComparisonPage: specialisation across models — μMoE layers and the router study's sparse
// and soft MoE layers on one table and chart (the paper's "mean polysemanticity vs N", its
// Fig. 3, and issue 18's comparison). The user adds model files (e.g. the expert-count sweep's
// heads and `mumoe train --router` heads, all on the same data SPEC); for each, on a worker
// thread, the page calls analysis::compare_layer — the call `mumoe compare` makes — which
// extracts and sweeps what the cache lacks, and adds its row: layer kind, N, parameters,
// accuracy, mean polysemanticity, experts with an effect, class purity, I(E;Y)/H(Y), load CV,
// dead experts, dropped samples, cost per sample. The chart plots the chosen figure against N
// (log axis), one line per layer kind (μMoE CP entmax15, Soft MoE, …). The jobs are the
// ComparisonController's (comparison_controller.h); the page shows the rows that arrive.
//
// Torch-free header.
#pragma once

#include <QString>
#include <QStringList>
#include <QVector>
#include <QWidget>

#include "analysis/layer_comparison.h"

class QChart;
class QComboBox;
class QChartView;
class QLabel;
class QLineEdit;
class QPushButton;
class QTableWidget;

namespace mumoe::ui {

class ComparisonController;
class WorkerQueue;

/// One model's row: the core's comparison (layer_comparison.h says what each figure means).
using ComparedModel = analysis::LayerComparison;

/// "μMoE CP entmax15", "Soft MoE", …: the chart's line a row belongs to.
QString seriesName(const ComparedModel& model);

class ModelComparisonPage : public QWidget {
  Q_OBJECT

 public:
  explicit ModelComparisonPage(QWidget* parent = nullptr);
  ~ModelComparisonPage() override;

  /// Data SPEC and cache used for models added from now on ("" cache = the core's default).
  /// Another SPEC or cache clears the rows and drops the sweeps still queued.
  void setData(const QString& dataSpec, const QString& cachePath);
  /// The layer compared in each model ("" = its only layer; "blocks.1.mlp" = a ViT block's MLP).
  /// Another layer clears the rows, as another data set does.
  void setLayer(const QString& layer);
  QString layer() const;
  /// Queues the models (one worker job each); rows appear as they finish.
  void addModels(const QStringList& paths);
  void clear();

  const QVector<ComparedModel>& models() const { return models_; }
  WorkerQueue* worker() const;
  QChartView* chartView() const { return view_; }

 Q_SIGNALS:
  void modelCompared(const mumoe::ui::ComparedModel& model);

 private:
  void chooseModels();
  void rebuild();
  void rebuildChart();

  ComparisonController* controller_ = nullptr;
  QString dataSpec_ = QStringLiteral("fashion-mnist:test");
  QString cachePath_;
  QVector<ComparedModel> models_;
  QLabel* header_ = nullptr;
  QPushButton* add_ = nullptr;
  QPushButton* clear_ = nullptr;
  QTableWidget* table_ = nullptr;
  QComboBox* metric_ = nullptr;  ///< the figure the chart plots against N
  QLineEdit* layer_ = nullptr;    ///< the layer compared in each model, as typed
  QString layerInUse_;            ///< the layer of the rows shown and queued
  QChartView* view_ = nullptr;
  QChart* chart_ = nullptr;
};

}  // namespace mumoe::ui
