// Paints one gallery cell: the thumbnail (or a placeholder while it loads), the class label on a
// dark strip at the bottom, the coefficient a_n in green at the top right, and a red corner when
// the model's prediction is wrong (the tooltip names it).
#pragma once

#include <QStyledItemDelegate>

namespace mumoe::ui {

class GalleryDelegate : public QStyledItemDelegate {
  Q_OBJECT

 public:
  explicit GalleryDelegate(QObject* parent = nullptr);
  void setSide(int side) { side_ = side; }
  int side() const { return side_; }

  void paint(QPainter* painter, const QStyleOptionViewItem& option, const QModelIndex& index) const override;
  QSize sizeHint(const QStyleOptionViewItem& option, const QModelIndex& index) const override;

 private:
  int side_ = 96;
};

}  // namespace mumoe::ui
