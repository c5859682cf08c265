// BiasPage's edit stack: Apply Edit, Undo and Redo (run by the controller on its worker, mirrored
// in the core's edit stack and the session database), and the list of edits with the actions'
// texts.
#include <QAction>
#include <QListWidget>
#include <QPushButton>

#include "bias_controller.h"
#include "bias_page.h"

namespace mumoe::ui {

void BiasPage::applyEdit() {
  if (!evaluation_ || !hasSession()) return;
  stackAskedAt_ = ++actions_;
  controller_->apply(evaluation_->edit);
}

void BiasPage::undoEdit() {
  stackAskedAt_ = ++actions_;
  controller_->undo();
}
void BiasPage::redoEdit() {
  stackAskedAt_ = ++actions_;
  controller_->redo();
}

void BiasPage::showStack() {
  const auto& stack = controller_->stack();
  edits_->clear();
  const auto& all = stack.all();
  for (size_t i = 0; i < all.size(); ++i) {
    const bool applied = i < stack.applied_count();
    auto* it = new QListWidgetItem(QStringLiteral("%1. %2%3")
                                       .arg(i + 1)
                                       .arg(QString::fromStdString(all[i].describe()))
                                       .arg(applied ? QString() : tr("  (undone)")));
    if (!applied) {
      it->setForeground(QColor(0x99, 0x99, 0x99));
      QFont f = it->font();
      f.setItalic(true);
      it->setFont(f);
    }
    edits_->addItem(it);
  }
  if (all.empty()) {
    auto* it = new QListWidgetItem(tr("No edits yet: choose λ and press Apply Edit."));
    it->setFlags(Qt::NoItemFlags);
    edits_->addItem(it);
  }
  exportButton_->setEnabled(hasSession());
  // Short texts ("Undo Edit"): the whole edit in a button or menu item was clipped until "Undo" could
  // not be read, and its "&" became a mnemonic. The tooltip and status tip name the edit (a
  // tooltip shows "&" as it is).
  const bool canUndo = hasSession() && stack.can_undo(), canRedo = hasSession() && stack.can_redo();
  undoAction_->setEnabled(canUndo);
  redoAction_->setEnabled(canRedo);
  const QString undone = canUndo ? QString::fromStdString(all[stack.applied_count() - 1].describe()) : QString();
  const QString redone = canRedo ? QString::fromStdString(all[stack.applied_count()].describe()) : QString();
  undoAction_->setText(tr("Undo Edit"));
  redoAction_->setText(tr("Redo Edit"));
  undoAction_->setToolTip(canUndo ? tr("Undo %1").arg(undone) : tr("Nothing to undo"));
  redoAction_->setToolTip(canRedo ? tr("Redo %1").arg(redone) : tr("Nothing to redo"));
  undoAction_->setStatusTip(undoAction_->toolTip());
  redoAction_->setStatusTip(redoAction_->toolTip());
}

}  // namespace mumoe::ui
