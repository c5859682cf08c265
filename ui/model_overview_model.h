// A table model with one row per μMoE layer of an opened model file.
#pragma once

#include <QAbstractTableModel>

#include "model/model_summary.h"

namespace mumoe::ui {

class ModelOverviewModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Name, Variant, Experts, Ranks, Shape, Gating, Parameters, ColumnCount };
  /// Raw values for sorting and tests (numbers as qlonglong), alongside DisplayRole text.
  static constexpr int SortRole = Qt::UserRole + 1;

  explicit ModelOverviewModel(QObject* parent = nullptr);

  /// Replaces the content (model reset).
  void setSummary(const model::ModelSummary& summary);
  void clear();
  const model::ModelSummary& summary() const { return summary_; }
  bool isEmpty() const { return summary_.layers.empty(); }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  model::ModelSummary summary_;
};

}  // namespace mumoe::ui
