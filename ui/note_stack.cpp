#include "note_stack.h"

#include <QLabel>
#include <QVBoxLayout>

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

NoteStack* NoteStack::fillPage(QWidget* page, QWidget* header, QWidget* body) {
  auto* content = new QWidget;
  auto* column = new QVBoxLayout(content);
  column->setContentsMargins(6, 6, 6, 6);
  column->addWidget(header);
  column->addWidget(body, 1);
  auto* stack = new NoteStack(content);
  auto* layout = new QVBoxLayout(page);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(stack);
  return stack;
}

void NoteStack::showNote(const QString& html) {
  note_->setText(html);
  setCurrentIndex(0);
}

void NoteStack::showContent() { setCurrentIndex(1); }

bool NoteStack::showsContent() const { return currentIndex() == 1; }

}  // namespace mumoe::ui
