// TokenGalleryModel and TokenContextDelegate: a token gallery (analysis/token_gallery.h) as a
// list, each token drawn inside its context with the token highlighted, a_n and whether the
// model predicted the next token before it (the Tokens page's gallery; tests: ItemModelsTest).
#pragma once

#include <QAbstractListModel>
#include <QStyledItemDelegate>

#include "analysis/token_gallery.h"

namespace mumoe::ui {

/// One row per gallery item; DisplayRole is "before«token»after".
class TokenGalleryModel : public QAbstractListModel {
  Q_OBJECT

 public:
  enum Role { BeforeRole = Qt::UserRole + 1, TokenRole, AfterRole, CoefficientRole, PositionRole, CorrectRole };
  using QAbstractListModel::QAbstractListModel;
  void setGallery(const analysis::TokenGallery& gallery);
  const analysis::TokenGallery& gallery() const { return gallery_; }
  int rowCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;

 private:
  analysis::TokenGallery gallery_;
};

/// Draws a_n, then the context with the token on a highlighted background, one line per item.
class TokenContextDelegate : public QStyledItemDelegate {
  Q_OBJECT

 public:
  using QStyledItemDelegate::QStyledItemDelegate;
  void paint(QPainter* painter, const QStyleOptionViewItem& option, const QModelIndex& index) const override;
  QSize sizeHint(const QStyleOptionViewItem& option, const QModelIndex& index) const override;
};

}  // namespace mumoe::ui
