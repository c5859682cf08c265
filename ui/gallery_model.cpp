#include "gallery_model.h"

#include <QLocale>
#include <QPixmap>

#include <algorithm>

#include "thumbnail_store.h"

namespace mumoe::ui {

GalleryModel::GalleryModel(ThumbnailStore* store, QObject* parent) : QAbstractListModel(parent), store_(store) {
  if (store_) connect(store_, &ThumbnailStore::imagesArrived, this, &GalleryModel::imagesArrived);
}

void GalleryModel::setGallery(const analysis::Gallery& gallery, const QStringList& classNames) {
  beginResetModel();
  gallery_ = gallery;
  classNames_ = classNames;
  names_.clear();
  for (const auto& name : classNames) names_.push_back(name.toStdString());
  rowsOfKey_.clear();
  for (int row = 0; row < static_cast<int>(gallery_.items.size()); ++row)
    rowsOfKey_[imageKey(gallery_.items[static_cast<size_t>(row)])] << row;
  endResetModel();
}

void GalleryModel::clear() { setGallery({}, {}); }

void GalleryModel::setThumbnailSide(int side) {
  if (side == side_) return;
  side_ = side;
  if (rowCount() > 0) Q_EMIT dataChanged(index(0), index(rowCount() - 1), {Qt::DecorationRole});
}

int GalleryModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(gallery_.items.size());
}

QString GalleryModel::className(int64_t c) const {
  // A multi-label model's label is a bitmask of its positive outputs: "upper_body+long_sleeves".
  if (gallery_.multilabel) return QString::fromStdString(analysis::label_text(c, names_, true));
  return c >= 0 && c < classNames_.size() ? classNames_[static_cast<int>(c)] : QString::number(c);
}

QVariant GalleryModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const auto& item = gallery_.items[static_cast<size_t>(index.row())];
  switch (role) {
    case Qt::DisplayRole: return className(item.label);
    case Qt::DecorationRole:
      if (!store_) return {};
      if (const QPixmap p = store_->thumbnail(imageKey(item), side_); !p.isNull()) return p;
      return {};
    case Qt::ToolTipRole:
      return tr("Sample %1\nlabel: %2\nprediction: %3\na = %4")
                 .arg(item.sample)
                 .arg(className(item.label), className(item.prediction))
                 .arg(QLocale().toString(item.coefficient, 'f', 4)) +
             (item.patch >= 0 ? tr("\nstrongest patch %1 (outlined)").arg(item.patch) : QString());
    case SampleRole: return qlonglong(item.sample);
    case LabelRole: return qlonglong(item.label);
    case LabelNameRole: return className(item.label);
    case PredictionRole: return qlonglong(item.prediction);
    case PredictionNameRole: return className(item.prediction);
    case CorrectRole: return item.label == item.prediction;
    case CoefficientRole: return item.coefficient;
    case ImageKeyRole: return imageKey(item);
    default: return {};
  }
}

QHash<int, QByteArray> GalleryModel::roleNames() const {
  auto names = QAbstractListModel::roleNames();
  names.insert(SampleRole, "sample");
  names.insert(LabelRole, "label");
  names.insert(LabelNameRole, "labelName");
  names.insert(PredictionRole, "prediction");
  names.insert(PredictionNameRole, "predictionName");
  names.insert(CorrectRole, "correct");
  names.insert(CoefficientRole, "coefficient");
  names.insert(ImageKeyRole, "imageKey");
  return names;
}

qlonglong GalleryModel::imageKey(const analysis::GalleryItem& item) { return thumbnailKey(item.sample, item.patch); }

void GalleryModel::imagesArrived(const QVector<qint64>& keys) {
  int first = rowCount(), last = -1;
  for (auto key : keys)
    for (int row : rowsOfKey_.value(key)) {
      first = std::min(first, row);
      last = std::max(last, row);
    }
  if (last >= first) Q_EMIT dataChanged(index(first), index(last), {Qt::DecorationRole});
}

}  // namespace mumoe::ui
