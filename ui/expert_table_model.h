// One row per expert of one expert mode: load, support, top classes (dead experts greyed and
// marked) (from the core's ModeStatistics) and, once the sweep is known, the accuracy drop and
// polysemanticity of removing it (SweepOutcome). Plus ExpertFilterProxy: hide dead experts and
// filter by class name or expert number.
#pragma once

#include <QAbstractTableModel>
#include <QSortFilterProxyModel>
#include <QStringList>

#include <optional>

#include "analysis/ablation_results.h"
#include "analysis/expert_statistics.h"

namespace mumoe::ui {

class ExpertTableModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Expert, Load, Support, AccuracyChange, Polysemanticity, TopClasses, ColumnCount };
  /// Raw values for sorting and tests: numbers as qlonglong / double; NaN-free (unknown = -1).
  static constexpr int SortRole = Qt::UserRole + 1;
  /// The expert number (qlonglong) of the row, in every column.
  static constexpr int ExpertRole = Qt::UserRole + 2;
  static constexpr int DeadRole = Qt::UserRole + 3;

  explicit ExpertTableModel(QObject* parent = nullptr);

  /// Replaces the rows (model reset); clears the sweep if its mode differs.
  void setStatistics(const analysis::ModeStatistics& statistics, const QStringList& classNames);
  /// Fills the sweep columns (dataChanged) when the sweep belongs to the shown mode.
  void setSweep(const analysis::SweepOutcome& sweep, const analysis::ClassAccuracy& before);
  void clear();

  const analysis::ModeStatistics& statistics() const { return statistics_; }
  bool hasSweep() const { return sweep_.has_value(); }
  /// The row of an expert, or -1.
  int rowOfExpert(qint64 expert) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  QString topClassesText(const analysis::ExpertSummary& e) const;

  analysis::ModeStatistics statistics_;
  QStringList classNames_;
  std::optional<analysis::SweepOutcome> sweep_;
  double accuracyBefore_ = 0;
};

/// Sorts by ExpertTableModel::SortRole; hides dead experts on request; a filter text that is a
/// number keeps that expert, any other keeps the rows whose top classes contain it (any case).
class ExpertFilterProxy : public QSortFilterProxyModel {
  Q_OBJECT

 public:
  explicit ExpertFilterProxy(QObject* parent = nullptr);
  void setHideDead(bool hide);
  bool hideDead() const { return hideDead_; }
  void setFilterText(const QString& text);

 protected:
  bool filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const override;

 private:
  bool hideDead_ = false;
  QString text_;
};

}  // namespace mumoe::ui
