// GalleryModel: one row per sample of an expert gallery (core/analysis/gallery.h), with the
// thumbnail as DecorationRole (fetched lazily through a ThumbnailStore; a null pixmap while it
// loads) and the sample's label, prediction and coefficient as roles for the delegate.
#pragma once

#include <QAbstractListModel>
#include <QHash>
#include <QStringList>
#include <QVector>

#include "analysis/gallery.h"

namespace mumoe::ui {

class ThumbnailStore;

class GalleryModel : public QAbstractListModel {
  Q_OBJECT

 public:
  enum Role {
    SampleRole = Qt::UserRole + 1,  ///< qlonglong
    LabelRole,                      ///< class index (qlonglong)
    LabelNameRole,                  ///< QString
    PredictionRole,                 ///< class index (qlonglong)
    PredictionNameRole,             ///< QString
    CorrectRole,                    ///< bool
    CoefficientRole,                ///< double
    ImageKeyRole,                   ///< the ThumbnailStore key of the item's picture (qlonglong)
  };

  /// `store` may be null (no images: DecorationRole stays empty).
  explicit GalleryModel(ThumbnailStore* store, QObject* parent = nullptr);

  void setGallery(const analysis::Gallery& gallery, const QStringList& classNames);
  void clear();
  const analysis::Gallery& gallery() const { return gallery_; }
  /// Side of the DecorationRole pixmaps.
  void setThumbnailSide(int side);
  int thumbnailSide() const { return side_; }

  int rowCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QHash<int, QByteArray> roleNames() const override;

 private:
  void imagesArrived(const QVector<qint64>& keys);
  static qlonglong imageKey(const analysis::GalleryItem& item);
  QString className(int64_t c) const;

  ThumbnailStore* store_;
  analysis::Gallery gallery_;
  QStringList classNames_;
  std::vector<std::string> names_;  ///< classNames_ for analysis::label_text
  QHash<qint64, QVector<int>> rowsOfKey_;  ///< ThumbnailStore key → rows showing that picture
  int side_ = 96;
};

}  // namespace mumoe::ui
