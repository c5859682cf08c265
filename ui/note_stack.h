// NoteStack: a page's two faces — a note (what to open, progress, why it cannot show anything)
// until its session is ready, then its content. The Bias and Tokens pages use it.
#pragma once

#include <QStackedWidget>

class QLabel;

namespace mumoe::ui {

class NoteStack : public QStackedWidget {
  Q_OBJECT

 public:
  /// `content` is shown by showContent(); the stack owns it.
  explicit NoteStack(QWidget* content, QWidget* parent = nullptr);
  /// The usual page: a stack that fills `page`, whose content is `header` above `body` (which
  /// takes the height left).
  static NoteStack* fillPage(QWidget* page, QWidget* header, QWidget* body);
  /// Shows `html` (rich text, selectable) instead of the content.
  void showNote(const QString& html);
  void showContent();
  bool showsContent() const;
  QLabel* note() const { return note_; }

 private:
  QLabel* note_ = nullptr;
};

}  // namespace mumoe::ui
