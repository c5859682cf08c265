#include "model_overview_model.h"

#include "format.h"

namespace mumoe::ui {

ModelOverviewModel::ModelOverviewModel(QObject* parent) : QAbstractTableModel(parent) {}

void ModelOverviewModel::setSummary(const model::ModelSummary& summary) {
  beginResetModel();
  summary_ = summary;
  endResetModel();
}

void ModelOverviewModel::clear() { setSummary({}); }

int ModelOverviewModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(summary_.layers.size());
}

int ModelOverviewModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant ModelOverviewModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const auto& layer = summary_.layers[static_cast<size_t>(index.row())];
  const auto& c = layer.config;
  if (role == Qt::TextAlignmentRole && index.column() == Parameters)
    return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
  if (layer.router) {
    // A sparse or soft MoE layer: its router in the Variant column, no ranks or gates.
    const auto& r = *layer.router;
    if (role == SortRole)
      return index.column() == Experts ? QVariant(static_cast<qlonglong>(r.experts))
             : index.column() == Parameters ? QVariant(static_cast<qlonglong>(layer.total_parameters()))
                                            : data(index, Qt::DisplayRole);
    if (role == Qt::ToolTipRole) return QString::fromStdString(layer.router_description());
    if (role != Qt::DisplayRole) return {};
    switch (index.column()) {
      case Name: return QString::fromStdString(layer.name);
      case Variant: return QString::fromStdString(nn::display_name(r.router));
      case Experts: return QString::number(r.experts);
      case Ranks: return QStringLiteral("—");
      case Shape:
        return r.hidden_dim > 0 ? QStringLiteral("%1 → %2 → %3").arg(r.input_dim).arg(r.hidden_dim).arg(r.output_dim)
                                : QStringLiteral("%1 → %2").arg(r.input_dim).arg(r.output_dim);
      case Gating:
        return r.router == nn::RouterKind::SoftMoE ? tr("%1 slot(s) per expert").arg(r.slots_per_expert)
               : r.sequence_groups ? tr("capacity ×%1, per sequence (buffers of %2)").arg(r.capacity_factor).arg(r.group_size)
                                   : tr("capacity ×%1, groups of %2").arg(r.capacity_factor).arg(r.group_size);
      case Parameters: return groupedNumber(layer.total_parameters());
    }
    return {};
  }
  if (role == SortRole) {
    switch (index.column()) {
      case Experts: return static_cast<qlonglong>(c.total_experts());
      case Parameters: return static_cast<qlonglong>(layer.parameters.total());
      default: role = Qt::DisplayRole;
    }
  }
  if (role == Qt::ToolTipRole && index.column() == Parameters)
    return tr("factors %1, gating %2, input norm %3")
        .arg(groupedNumber(layer.parameters.factors), groupedNumber(layer.parameters.gating),
             groupedNumber(layer.parameters.input_norm));
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case Name: return QString::fromStdString(layer.name);
    case Variant:
      return QString::fromStdString(c.variant_name()) + (c.is_block() ? tr(" block") : QString()) +
             (c.hierarchy() > 1 ? tr(", %1 levels").arg(c.hierarchy()) : QString());
    case Experts:
      return c.hierarchy() > 1 ? QStringLiteral("%1 = %2").arg(joinDims(c.expert_dims)).arg(c.total_experts())
                               : QString::number(c.total_experts());
    case Ranks: return rankText(c);
    case Shape: return shapeText(c);
    case Gating: return gatingText(c);
    case Parameters: return groupedNumber(layer.parameters.total());
  }
  return {};
}

QVariant ModelOverviewModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case Name: return tr("Layer");
    case Variant: return tr("Variant");
    case Experts: return tr("Experts");
    case Ranks: return tr("Ranks");
    case Shape: return tr("Shape");
    case Gating: return tr("Gating");
    case Parameters: return tr("Parameters");
  }
  return {};
}

}  // namespace mumoe::ui
