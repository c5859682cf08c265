// The edit session database: a small SQLite file that keeps each model's edit stack (edits,
// including undone ones, and how many are applied), so edits survive closing the tool and
// `mumoe export --session DB` can fold them later. Plain C++ + SQLite (no LibTorch, no Qt).
//
// One row per model, keyed by the model file's content hash (a moved or renamed model keeps its
// edits; a changed model does not inherit edits meant for another). Every save is one
// transaction, so a crash leaves the previous save intact.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "editing/edit_stack.h"

namespace mumoe::cache {
class Database;
}

namespace mumoe::editing {

struct StoredSession {
  std::string model_hash;
  std::string model_path;  ///< where the model was when last saved
  EditStack stack;
  std::string saved_at;    ///< UTC, ISO 8601
  /// Stored edits that could not be read ("edit 3: edit lambda is not finite"), left out of
  /// `stack` so that the others stay usable (listing, undo, clear); the next save writes the
  /// stack without them. Callers that fold edits (export, rewrite) refuse while there are any.
  std::vector<std::string> damaged;
};

class EditSessionStore {
 public:
  enum OpenMode { kCreate, kMustExist };
  /// Opens the database, creating it with kCreate when there is none. Throws FileError when the
  /// file is not an edit session database (another SQLite file, garbage, a FIFO) — it is never
  /// modified then — and, with kMustExist, when there is no file at `path`.
  static std::unique_ptr<EditSessionStore> open(const std::string& path, OpenMode mode = kCreate);
  ~EditSessionStore();

  void save(const std::string& model_hash, const std::string& model_path, const EditStack& stack);
  std::optional<StoredSession> load(const std::string& model_hash) const;
  /// Every stored session (most recently saved first).
  std::vector<StoredSession> sessions() const;
  const std::string& path() const { return path_; }

 private:
  EditSessionStore(std::string path, std::unique_ptr<cache::Database> db);
  std::string path_;
  std::unique_ptr<cache::Database> db_;
};

/// The edits applied in the session database `session_path` to the model file `model_path` (found
/// by its content hash), for a command that only reads them (`export --session`, `report
/// --session`): the database must exist — a mistyped path creates nothing. UsageError when it holds
/// no edits for the model, or damaged ones (leaving those out would silently change the edited
/// model: the message says how to drop them).
std::vector<LogitEdit> applied_session_edits(const std::string& session_path, const std::string& model_path);

}  // namespace mumoe::editing
