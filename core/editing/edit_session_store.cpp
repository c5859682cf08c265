#include "editing/edit_session_store.h"
#include "io/json_file.h"

#include <sqlite3.h>

#include <ctime>

#include "analysis/content_hash.h"
#include "cache/sqlite_database.h"
#include "io/errors.h"
#include "io/file_checks.h"

namespace mumoe::editing {
namespace {

constexpr const char* kApplicationName = "mumoe-edit-session";
constexpr int64_t kSchemaVersion = 1;

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

StoredSession read_row(const cache::Statement& s, const std::string& path) {
  StoredSession out;
  out.model_hash = s.column_text(0);
  out.model_path = s.column_text(1);
  const auto j = io::parse_bounded_json(s.column_text(2), path, "the stored edit list of " + out.model_path);
  const std::string source = "stored edit list of " + out.model_path;
  try {
    out.stack = EditStack::from_json(j, source);
  } catch (const UsageError& e) {
    // One damaged edit (a λ stored as null by an older version, issue 45) must not make the
    // others unreachable: each edit is read alone, the damaged ones are reported and left out.
    const auto* list = j.is_object() && j.contains("edits") ? &j.at("edits") : &j;
    if (!list->is_array()) throw FileError(path, e.what());
    int64_t applied = j.is_object() && j.value("applied", nlohmann::json()).is_number_integer()
                          ? j.at("applied").get<int64_t>()
                          : static_cast<int64_t>(list->size());
    nlohmann::json kept = nlohmann::json::array();
    int64_t kept_applied = 0;
    for (size_t i = 0; i < list->size(); ++i) {
      try {
        (void)logit_edit_from_json(list->at(i), source);
        kept.push_back(list->at(i));
        if (static_cast<int64_t>(i) < applied) ++kept_applied;
      } catch (const UsageError& damage) {
        out.damaged.push_back("edit " + std::to_string(i + 1) + ": " + damage.what());
      }
    }
    try {
      out.stack = EditStack::from_json({{"edits", kept}, {"applied", kept_applied}}, source);
    } catch (const UsageError& again) {
      throw FileError(path, again.what());
    }
  }
  out.saved_at = s.column_text(3);
  return out;
}

}  // namespace

EditSessionStore::EditSessionStore(std::string path, std::unique_ptr<cache::Database> db)
    : path_(std::move(path)), db_(std::move(db)) {}
EditSessionStore::~EditSessionStore() = default;

std::unique_ptr<EditSessionStore> EditSessionStore::open(const std::string& path, OpenMode mode) {
  if (!io::regular_file_exists(path) && mode == kMustExist)
    throw FileError(path, "does not exist (an edit session database was expected: check the path)");
  std::unique_ptr<cache::Database> db;
  try {
    db = std::make_unique<cache::Database>(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    db->exec("PRAGMA busy_timeout = 5000");
    const bool fresh = db->query_int("SELECT count(*) FROM sqlite_master") == 0;
    if (fresh) {
      cache::Transaction t(*db);
      db->exec("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)");
      db->exec("CREATE TABLE edit_sessions(model_hash TEXT PRIMARY KEY, model_path TEXT NOT NULL, "
               "stack_json TEXT NOT NULL, saved_at TEXT NOT NULL)");
      db->prepare("INSERT INTO meta VALUES('application', ?1)").bind_text(1, kApplicationName).run();
      db->exec("PRAGMA user_version = " + std::to_string(kSchemaVersion));
      t.commit();
    } else {
      const bool ours = db->query_int("SELECT count(*) FROM sqlite_master WHERE type='table' AND name='meta'") == 1 &&
                        db->query_text("SELECT coalesce((SELECT value FROM meta WHERE key='application'), '')") ==
                            kApplicationName;
      if (!ours) throw FileError(path, "is an SQLite database but not a mumoe edit session; it was left untouched");
      const auto version = db->query_int("PRAGMA user_version");
      if (version > kSchemaVersion)
        throw FileError(path, "edit session schema version " + std::to_string(version) +
                                  " is newer than this build supports (" + std::to_string(kSchemaVersion) + ")");
    }
  } catch (const cache::SqliteError& e) {
    throw FileError(path, std::string("cannot use as an edit session database: ") + e.what());
  }
  return std::unique_ptr<EditSessionStore>(new EditSessionStore(path, std::move(db)));
}

void EditSessionStore::save(const std::string& model_hash, const std::string& model_path, const EditStack& stack) {
  try {
    cache::Transaction t(*db_);
    db_->prepare("INSERT OR REPLACE INTO edit_sessions VALUES(?1, ?2, ?3, ?4)")
        .bind_text(1, model_hash)
        .bind_text(2, model_path)
        .bind_text(3, stack.to_json().dump())
        .bind_text(4, utc_now())
        .run();
    t.commit();
  } catch (const cache::SqliteError& e) {
    throw WriteError(path_, std::string("cannot save the edits: ") + e.what());
  }
}

std::optional<StoredSession> EditSessionStore::load(const std::string& model_hash) const {
  auto s = db_->prepare("SELECT model_hash, model_path, stack_json, saved_at FROM edit_sessions WHERE model_hash = ?1");
  s.bind_text(1, model_hash);
  if (!s.step()) return std::nullopt;
  return read_row(s, path_);
}

std::vector<StoredSession> EditSessionStore::sessions() const {
  auto s = db_->prepare("SELECT model_hash, model_path, stack_json, saved_at FROM edit_sessions ORDER BY saved_at DESC");
  std::vector<StoredSession> out;
  while (s.step()) out.push_back(read_row(s, path_));
  return out;
}

std::vector<LogitEdit> applied_session_edits(const std::string& session_path, const std::string& model_path) {
  const auto store = EditSessionStore::open(session_path, EditSessionStore::kMustExist);
  const auto stored = store->load(analysis::hash_file(model_path));
  if (!stored) throw UsageError(session_path + " holds no edits for " + model_path + " (its content hash is not in it)");
  if (!stored->damaged.empty())
    throw UsageError(session_path + " holds " + std::to_string(stored->damaged.size()) + " damaged edit(s) of " +
                     model_path + " (" + stored->damaged.front() + "); leaving them out would change the model you "
                     "edited: remove them with `mumoe edits MODEL --session DB --drop-damaged` first");
  return stored->stack.applied();
}

}  // namespace mumoe::editing
