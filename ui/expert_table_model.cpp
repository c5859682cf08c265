#include "expert_table_model.h"

#include <QBrush>
#include <QColor>
#include <QLocale>

#include <cmath>

namespace mumoe::ui {

ExpertTableModel::ExpertTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void ExpertTableModel::setStatistics(const analysis::ModeStatistics& statistics, const QStringList& classNames) {
  beginResetModel();
  if (sweep_ && sweep_->mode != statistics.mode) sweep_.reset();
  statistics_ = statistics;
  classNames_ = classNames;
  endResetModel();
}

void ExpertTableModel::setSweep(const analysis::SweepOutcome& sweep, const analysis::ClassAccuracy& before) {
  if (sweep.mode != statistics_.mode || sweep.experts.size() != statistics_.experts.size()) return;
  sweep_ = sweep;
  accuracyBefore_ = before.overall;
  if (rowCount() > 0) Q_EMIT dataChanged(index(0, AccuracyChange), index(rowCount() - 1, Polysemanticity));
}

void ExpertTableModel::clear() {
  beginResetModel();
  statistics_ = {};
  classNames_.clear();
  sweep_.reset();
  endResetModel();
}

int ExpertTableModel::rowOfExpert(qint64 expert) const {
  return expert >= 0 && expert < rowCount() ? static_cast<int>(expert) : -1;
}

int ExpertTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(statistics_.experts.size());
}

int ExpertTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QString ExpertTableModel::topClassesText(const analysis::ExpertSummary& e) const {
  QStringList parts;
  for (const auto& [cls, count] : e.top_classes) {
    const QString name = cls >= 0 && cls < classNames_.size() ? classNames_[static_cast<int>(cls)] : QString::number(cls);
    const double share = e.load > 0 ? 100.0 * static_cast<double>(count) / static_cast<double>(e.load) : 0;
    parts << QStringLiteral("%1 %2%").arg(name).arg(share, 0, 'f', 0);
  }
  return parts.join(QStringLiteral(", "));
}

QVariant ExpertTableModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const auto& e = statistics_.experts[static_cast<size_t>(index.row())];
  const analysis::AblationOutcome* ablation = sweep_ ? &sweep_->experts[static_cast<size_t>(index.row())] : nullptr;
  const double change = ablation ? (ablation->after.overall - accuracyBefore_) * 100 : 0;
  const double poly = ablation && ablation->has_effect && std::isfinite(ablation->polysemanticity) ? ablation->polysemanticity : -1;
  const QLocale locale;

  if (role == ExpertRole) return qlonglong(e.expert);
  if (role == DeadRole) return e.dead;
  if (role == SortRole) {
    switch (index.column()) {
      case Expert: return qlonglong(e.expert);
      case Load: return qlonglong(e.load);
      case Support: return qlonglong(e.support);
      case TopClasses: return e.top_classes.empty() ? qlonglong(-1) : qlonglong(e.top_classes.front().first);
      case AccuracyChange: return ablation ? change : 1e9;  // unknown sorts last ascending
      case Polysemanticity: return poly;
      default: return {};
    }
  }
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case Expert: return QString::number(e.expert);
      case Load: return locale.toString(qlonglong(e.load));
      case Support: return locale.toString(qlonglong(e.support));
      case TopClasses: return e.dead ? tr("dead (load 0)") : topClassesText(e);
      case AccuracyChange:
        if (!ablation) return QStringLiteral("…");
        return ablation->changed_predictions == 0 ? QStringLiteral("0") : locale.toString(change, 'f', 2) + QStringLiteral(" pp");
      case Polysemanticity:
        if (!ablation) return QStringLiteral("…");
        return poly < 0 ? QStringLiteral("—") : locale.toString(poly, 'f', 3);
      default: return {};
    }
  }
  if (role == Qt::TextAlignmentRole)
    return index.column() == TopClasses ? QVariant(Qt::AlignLeft | Qt::AlignVCenter)
                                                                    : QVariant(Qt::AlignRight | Qt::AlignVCenter);
  if (role == Qt::ForegroundRole) {
    if (e.dead) return QBrush(QColor(0x99, 0x99, 0x99));
    if (index.column() == AccuracyChange && ablation && change < -0.005) return QBrush(QColor(0xc6, 0x28, 0x28));
  }
  if (role == Qt::ToolTipRole) {
    if (index.column() == Polysemanticity)
      return tr("p = ‖d − onehot(argmax d)‖₂ of the per-class accuracy drops when this expert is removed "
                "(0 = monosemantic; — = removing it changes nothing)");
    if (index.column() == Load) return tr("samples with a ≥ %1").arg(statistics_.threshold);
    if (index.column() == Support) return tr("samples with a > 0: those an ablation can change");
    if (index.column() == TopClasses)
      return tr("Mean a = %1; argmax for %2 samples").arg(e.mean_coefficient, 0, 'f', 4).arg(e.argmax_count);
    if (index.column() == AccuracyChange && ablation)
      return tr("%n prediction(s) change when expert %1 is removed", nullptr, static_cast<int>(ablation->changed_predictions))
          .arg(e.expert);
  }
  return {};
}

QVariant ExpertTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || section < 0 || section >= ColumnCount) return {};
  if (role == Qt::DisplayRole) {
    switch (section) {
      case Expert: return tr("Expert");
      case Load: return tr("Load");
      case Support: return tr("Support");
      case TopClasses: return statistics_.multilabel ? tr("Positive outputs") : tr("Top classes");
      case AccuracyChange: return tr("Δ acc.");
      case Polysemanticity: return tr("Polysem.");
      default: return {};
    }
  }
  if (role == Qt::ToolTipRole) {
    switch (section) {
      case Load: return tr("Samples whose coefficient for this expert reaches the threshold");
      case TopClasses:
        return statistics_.multilabel ? tr("A multi-label model's outputs most often positive (true) among the expert's load samples")
                                 : tr("The classes most frequent among the expert's load samples");
      case AccuracyChange: return tr("Overall accuracy change when this expert alone is removed (from the sweep)");
      case Polysemanticity: return tr("Polysemanticity of the expert's ablation (Eq. 4, ‖d − onehot(argmax d)‖₂ over the relative class "
                                   "accuracy drops d; from the sweep): lower is more specialised, and an expert whose "
                                   "removal costs one class only a little scores near 1");
      default: return {};
    }
  }
  return {};
}

ExpertFilterProxy::ExpertFilterProxy(QObject* parent) : QSortFilterProxyModel(parent) {
  setSortRole(ExpertTableModel::SortRole);
}

void ExpertFilterProxy::setHideDead(bool hide) {
  if (hide == hideDead_) return;
  hideDead_ = hide;
  invalidateFilter();
}

void ExpertFilterProxy::setFilterText(const QString& text) {
  if (text == text_) return;
  text_ = text.trimmed();
  invalidateFilter();
}

bool ExpertFilterProxy::filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const {
  const auto* source = sourceModel();
  if (!source) return true;
  if (hideDead_ && source->index(sourceRow, 0, sourceParent).data(ExpertTableModel::DeadRole).toBool()) return false;
  if (text_.isEmpty()) return true;
  // A number names an expert; anything else is matched against the top classes.
  bool isNumber = false;
  const qlonglong expert = text_.toLongLong(&isNumber);
  if (isNumber) return source->index(sourceRow, 0, sourceParent).data(ExpertTableModel::ExpertRole).toLongLong() == expert;
  return source->index(sourceRow, ExpertTableModel::TopClasses, sourceParent)
      .data()
      .toString()
      .contains(text_, Qt::CaseInsensitive);
}

}  // namespace mumoe::ui
