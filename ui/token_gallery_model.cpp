#include "token_gallery_model.h"

#include <QApplication>
#include <QFontDatabase>
#include <QPainter>

#include <algorithm>

namespace mumoe::ui {

// ---------------------------------------------------------------------------------------------
// TokenGalleryModel

void TokenGalleryModel::setGallery(const analysis::TokenGallery& gallery) {
  beginResetModel();
  gallery_ = gallery;
  endResetModel();
}

int TokenGalleryModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(gallery_.items.size());
}

QVariant TokenGalleryModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() < 0 || index.row() >= rowCount()) return {};
  const auto& it = gallery_.items[static_cast<size_t>(index.row())];
  switch (role) {
    case Qt::DisplayRole:
      return QString::fromStdString(it.context.before) + QStringLiteral("«") + QString::fromStdString(it.context.token) +
             QStringLiteral("»") + QString::fromStdString(it.context.after);
    case Qt::ToolTipRole:
      return tr("a = %1 · sequence %2, position %3 · document %4 · next token %5, predicted %6")
          .arg(it.coefficient, 0, 'f', 3)
          .arg(it.sequence)
          .arg(it.position)
          .arg(it.document)
          .arg(it.target)
          .arg(it.prediction);
    case BeforeRole: return QString::fromStdString(it.context.before);
    case TokenRole: return QString::fromStdString(it.context.token);
    case AfterRole: return QString::fromStdString(it.context.after);
    case CoefficientRole: return it.coefficient;
    case PositionRole: return QStringLiteral("seq %1 · pos %2").arg(it.sequence).arg(it.position);
    case CorrectRole: return it.prediction == it.target;
    default: return {};
  }
}

// ---------------------------------------------------------------------------------------------
// TokenContextDelegate

QSize TokenContextDelegate::sizeHint(const QStyleOptionViewItem& option, const QModelIndex&) const {
  QFont mono = QFontDatabase::systemFont(QFontDatabase::FixedFont);
  return QSize(200, QFontMetrics(mono).height() + 10);  // the view's width: no horizontal scrolling
}

void TokenContextDelegate::paint(QPainter* p, const QStyleOptionViewItem& option, const QModelIndex& index) const {
  QStyleOptionViewItem opt(option);
  initStyleOption(&opt, index);
  opt.text.clear();
  QApplication::style()->drawControl(QStyle::CE_ItemViewItem, &opt, p, opt.widget);
  p->save();
  QFont mono = QFontDatabase::systemFont(QFontDatabase::FixedFont);
  p->setFont(mono);
  const QFontMetrics fm(mono);
  const QRect r = option.rect.adjusted(6, 0, -6, 0);
  const bool selected = option.state & QStyle::State_Selected;
  const QColor text = selected ? option.palette.highlightedText().color() : option.palette.text().color();
  const QColor dim = selected ? text : QColor(0x70, 0x70, 0x70);

  // a_n, then whether the model predicted the next token (✓/✗).
  const double a = index.data(TokenGalleryModel::CoefficientRole).toDouble();
  const QString coefficient = QStringLiteral("a=%1").arg(a, 0, 'f', 2);
  const int coeffWidth = fm.horizontalAdvance(QStringLiteral("a=0.00 ✓ "));
  p->setPen(selected ? text : QColor(0x1b, 0x7f, 0x3b));
  p->drawText(QRect(r.left(), r.top(), coeffWidth, r.height()), Qt::AlignVCenter | Qt::AlignLeft, coefficient);
  const bool correct = index.data(TokenGalleryModel::CorrectRole).toBool();
  p->setPen(selected ? text : correct ? QColor(0x1b, 0x7f, 0x3b) : QColor(0xb0, 0x2a, 0x2a));
  p->drawText(QRect(r.left() + fm.horizontalAdvance(QStringLiteral("a=0.00 ")), r.top(), fm.horizontalAdvance(QStringLiteral("✓ ")), r.height()),
              Qt::AlignVCenter | Qt::AlignLeft, correct ? QStringLiteral("✓") : QStringLiteral("✗"));

  // The token centred in the remaining width; context elided on the outer sides.
  const QRect textRect(r.left() + coeffWidth, r.top(), r.width() - coeffWidth, r.height());
  const QString token = index.data(TokenGalleryModel::TokenRole).toString();
  const int tokenWidth = fm.horizontalAdvance(token) + 6;
  const int centre = textRect.left() + std::max(textRect.width() * 2 / 5, tokenWidth);
  const int beforeWidth = centre - textRect.left();
  const int afterWidth = textRect.right() - (centre + tokenWidth);
  const QString before = fm.elidedText(index.data(TokenGalleryModel::BeforeRole).toString(), Qt::ElideLeft, beforeWidth);
  const QString after = fm.elidedText(index.data(TokenGalleryModel::AfterRole).toString(), Qt::ElideRight, std::max(afterWidth, 0));
  p->setPen(dim);
  p->drawText(QRect(textRect.left(), r.top(), beforeWidth, r.height()), Qt::AlignVCenter | Qt::AlignRight, before);
  const QRect tokenRect(centre, r.top() + 3, tokenWidth, r.height() - 6);
  p->fillRect(tokenRect, QColor(0xff, 0xd8, 0x4d));
  p->setPen(QColor(0x20, 0x20, 0x20));
  QFont bold = mono;
  bold.setBold(true);
  p->setFont(bold);
  p->drawText(tokenRect, Qt::AlignCenter, token);
  p->setFont(mono);
  p->setPen(dim);
  p->drawText(QRect(centre + tokenWidth, r.top(), std::max(afterWidth, 0), r.height()), Qt::AlignVCenter | Qt::AlignLeft, after);
  p->restore();
}

}  // namespace mumoe::ui
