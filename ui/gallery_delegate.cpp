#include "gallery_delegate.h"

#include <QApplication>
#include <QPainter>
#include <QPixmap>

#include "gallery_model.h"

namespace mumoe::ui {

constexpr int kMargin = 3;

GalleryDelegate::GalleryDelegate(QObject* parent) : QStyledItemDelegate(parent) {}

QSize GalleryDelegate::sizeHint(const QStyleOptionViewItem&, const QModelIndex&) const {
  return {side_ + 2 * kMargin, side_ + 2 * kMargin};
}

void GalleryDelegate::paint(QPainter* painter, const QStyleOptionViewItem& option, const QModelIndex& index) const {
  painter->save();
  painter->setRenderHint(QPainter::Antialiasing, false);
  const QRect cell = option.rect.adjusted(kMargin, kMargin, -kMargin, -kMargin);
  const QPalette& palette = option.palette;

  // The image (centred, letterboxed on black), or a placeholder while it loads.
  painter->fillRect(cell, QColor(0x1e, 0x1e, 0x1e));
  const QPixmap pixmap = index.data(Qt::DecorationRole).value<QPixmap>();
  if (!pixmap.isNull()) {
    const QSize size = pixmap.size().scaled(cell.size(), Qt::KeepAspectRatio);
    const QRect target(cell.center().x() - size.width() / 2 + 1, cell.center().y() - size.height() / 2 + 1, size.width(),
                       size.height());
    painter->drawPixmap(target, pixmap);
  } else {
    painter->setPen(QColor(0x80, 0x80, 0x80));
    painter->drawText(cell, Qt::AlignCenter, QStringLiteral("#%1").arg(index.data(GalleryModel::SampleRole).toLongLong()));
  }

  QFont font = option.font;
  font.setPointSizeF(std::max(6.5, font.pointSizeF() * (side_ >= 80 ? 0.85 : 0.72)));
  painter->setFont(font);
  const int strip = QFontMetrics(font).height() + 2;

  // Label: white on a translucent strip.
  const QRect labelRect(cell.left(), cell.bottom() - strip + 1, cell.width(), strip);
  painter->fillRect(labelRect, QColor(0, 0, 0, 170));
  painter->setPen(Qt::white);
  const QString label = index.data(GalleryModel::LabelNameRole).toString();
  painter->drawText(labelRect.adjusted(3, 0, -3, 0), Qt::AlignLeft | Qt::AlignVCenter,
                    QFontMetrics(font).elidedText(label, Qt::ElideRight, labelRect.width() - 6));

  // Coefficient: green, top right.
  const QString coefficient = QString::number(index.data(GalleryModel::CoefficientRole).toDouble(), 'f', 2);
  const int w = QFontMetrics(font).horizontalAdvance(coefficient) + 6;
  const QRect coefRect(cell.right() - w + 1, cell.top(), w, strip);
  painter->fillRect(coefRect, QColor(0, 0, 0, 170));
  painter->setPen(QColor(0x66, 0xe0, 0x7a));
  painter->drawText(coefRect, Qt::AlignCenter, coefficient);

  // A wrong prediction: red corner triangle, top left.
  if (!index.data(GalleryModel::CorrectRole).toBool()) {
    painter->setRenderHint(QPainter::Antialiasing, true);
    const int t = std::max(8, side_ / 7);
    const QPoint tl = cell.topLeft();
    const QPolygon triangle({tl, tl + QPoint(t, 0), tl + QPoint(0, t)});
    painter->setPen(Qt::NoPen);
    painter->setBrush(QColor(0xe5, 0x39, 0x35));
    painter->drawPolygon(triangle);
  }

  // Selection and focus.
  if (option.state & QStyle::State_Selected) {
    painter->setRenderHint(QPainter::Antialiasing, false);
    painter->setPen(QPen(palette.highlight().color(), 3));
    painter->setBrush(Qt::NoBrush);
    painter->drawRect(cell.adjusted(1, 1, -1, -1));
  }
  painter->restore();
}

}  // namespace mumoe::ui
