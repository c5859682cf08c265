#include "note_stack.h"

#include <QLabel>

namespace mumoe::ui {

NoteStack::NoteStack(QWidget* content, QWidget* parent) : QStackedWidget(parent) {
  note_ = new QLabel;
  note_->setWordWrap(true);
  note_->setTextFormat(Qt::RichText);
  note_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  note_->setMargin(24);
  note_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  addWidget(note_);
  addWidget(content);
}

void NoteStack::showNote(const QString& html) {
  note_->setText(html);
  setCurrentIndex(0);
}

void NoteStack::showContent() { setCurrentIndex(1); }

bool NoteStack::showsContent() const { return currentIndex() == 1; }

}  // namespace mumoe::ui
