// The ordered list of edits a user has made, with undo and redo (like QUndoStack, but plain
// C++ so that the CLI, the session database and the GUI share one definition).
//
// Edits [0, applied_count()) are in force, in order; undone edits after them can be redone
// until a new edit is pushed, which discards them.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <vector>

#include "editing/logit_edit.h"

namespace mumoe::editing {

class EditStack {
 public:
  /// Adds an edit after the applied ones (discarding any undone edits).
  void push(LogitEdit edit);
  bool can_undo() const { return applied_ > 0; }
  bool can_redo() const { return applied_ < edits_.size(); }
  /// Throws UsageError when there is nothing to undo / redo.
  void undo();
  void redo();
  void clear();

  /// The edits in force, in order.
  std::vector<LogitEdit> applied() const;
  /// Every edit, including undone ones.
  const std::vector<LogitEdit>& all() const { return edits_; }
  size_t applied_count() const { return applied_; }

  /// {"edits": [...], "applied": k}.
  nlohmann::json to_json() const;
  /// Throws UsageError naming `source` when the JSON is not a valid stack.
  static EditStack from_json(const nlohmann::json& json, const std::string& source);

 private:
  std::vector<LogitEdit> edits_;
  size_t applied_ = 0;
};

}  // namespace mumoe::editing
