// A result or error dialog opened once the job that reports it has finished: a job's answer is
// delivered inside the job runner (worker_queue.h), and a modal dialog opened right there kept the
// job "running" — busy bar moving, Cancel enabled — for as long as the dialog stayed open.
#pragma once

#include <QMessageBox>
#include <QPointer>
#include <QTimer>
#include <QWidget>

namespace mumoe::ui {

/// Opens a window-modal message box of `icon` over `parent` on the next turn of the event loop
/// (nothing if `parent` is gone by then). Not exec(): no nested event loop, so several results
/// do not stack loops, and the box — a child of `parent`, deleted when closed — goes with it.
inline void showResultDialog(QWidget* parent, QMessageBox::Icon icon, const QString& title, const QString& text) {
  QTimer::singleShot(0, parent, [parent = QPointer<QWidget>(parent), icon, title, text] {
    if (!parent) return;
    auto* box = new QMessageBox(icon, title, text, QMessageBox::Ok, parent);
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open();
  });
}

}  // namespace mumoe::ui
