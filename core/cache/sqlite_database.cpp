#include "cache/sqlite_database.h"

#include <sqlite3.h>

namespace mumoe::cache {
namespace {

// Enough of a statement to recognise it in an error message.
std::string sql_excerpt(const std::string& sql) {
  constexpr std::size_t kMax = 60;
  return sql.size() <= kMax ? sql : sql.substr(0, kMax) + "…";
}

}  // namespace

// ---- Database ---------------------------------------------------------------------------------

Database::Database(std::string path, int flags) : path_(std::move(path)) {
  int rc = sqlite3_open_v2(path_.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    // A failed open still returns a handle (unless out of memory) that holds the message.
    std::string message = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw SqliteError(path_, message, rc & 0xff);
  }
}

Database::~Database() {
  for (auto& [sql, statements] : idle_)
    for (auto* statement : statements) sqlite3_finalize(statement);
  sqlite3_close_v2(db_);
}

void Database::fail(int code, const std::string& context) const {
  std::string message = sqlite3_errmsg(db_);
  if (!context.empty()) message += " (" + context + ")";
  throw SqliteError(path_, message, code & 0xff);
}

void Database::exec(const std::string& sql) {
  char* error = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error);
  if (rc != SQLITE_OK) {
    std::string message = error ? error : sqlite3_errstr(rc);
    sqlite3_free(error);
    throw SqliteError(path_, message + " (" + sql_excerpt(sql) + ")", rc & 0xff);
  }
}

Statement Database::prepare(const std::string& sql) const { return Statement(*this, sql); }

Statement Database::prepare_cached(const std::string& sql) const {
  auto found = idle_.find(sql);
  if (found == idle_.end() || found->second.empty()) {
    Statement fresh(*this, sql);
    fresh.cached_ = true;
    return fresh;
  }
  auto* compiled = found->second.back();
  found->second.pop_back();
  return Statement(*this, sql, compiled);
}

int64_t Database::query_int(const std::string& sql) const {
  Statement s = prepare(sql);
  return s.step() ? s.column_int64(0) : 0;
}

std::string Database::query_text(const std::string& sql) const {
  Statement s = prepare(sql);
  return s.step() ? s.column_text(0) : std::string();
}

int64_t Database::last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }

bool Database::read_only() const { return sqlite3_db_readonly(db_, "main") == 1; }

void Database::keep_wal_on_close() {
  sqlite3_db_config(db_, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
}

// ---- Statement --------------------------------------------------------------------------------

Statement::Statement(const Database& db, const std::string& sql) : db_(&db), sql_(sql) {
  int rc = sqlite3_prepare_v2(db.handle(), sql.c_str(), static_cast<int>(sql.size() + 1), &stmt_, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(stmt_);
    stmt_ = nullptr;
    db.fail(rc, sql_excerpt(sql));
  }
}

Statement::Statement(const Database& db, const std::string& sql, sqlite3_stmt* compiled)
    : db_(&db), stmt_(compiled), sql_(sql), cached_(true) {}

Statement::~Statement() {
  if (!stmt_) return;
  if (!cached_) {
    sqlite3_finalize(stmt_);
    return;
  }
  // Back to the idle statements, ended: a statement left mid-way would hold its read
  // transaction open (and keep the write-ahead log from being checkpointed).
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  try {
    db_->idle_[sql_].push_back(stmt_);
  } catch (...) {  // out of memory: not kept
    sqlite3_finalize(stmt_);
  }
}

Statement::Statement(Statement&& other) noexcept
    : db_(other.db_), stmt_(other.stmt_), sql_(std::move(other.sql_)), cached_(other.cached_) {
  other.stmt_ = nullptr;
}

void Statement::check_bind(int rc, int index) {
  if (rc != SQLITE_OK) db_->fail(rc, "binding parameter " + std::to_string(index) + " of " + sql_excerpt(sql_));
}

Statement& Statement::bind_int64(int index, int64_t value) {
  check_bind(sqlite3_bind_int64(stmt_, index, value), index);
  return *this;
}

Statement& Statement::bind_double(int index, double value) {
  check_bind(sqlite3_bind_double(stmt_, index, value), index);
  return *this;
}

Statement& Statement::bind_text(int index, const std::string& value) {
  check_bind(sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8),
             index);
  return *this;
}

Statement& Statement::bind_blob(int index, const void* data, std::size_t size) {
  // sqlite3_bind_blob with a null pointer binds NULL, and an empty vector's data() may be null.
  int rc = size == 0 ? sqlite3_bind_zeroblob(stmt_, index, 0)
                     : sqlite3_bind_blob64(stmt_, index, data, size, SQLITE_STATIC);
  check_bind(rc, index);
  return *this;
}

bool Statement::step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  db_->fail(rc, sql_excerpt(sql_));
}

void Statement::run() {
  while (step()) {
  }
}

void Statement::reset() {
  // sqlite3_reset repeats the error of the last step, which step() has already reported.
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

int64_t Statement::column_int64(int column) const { return sqlite3_column_int64(stmt_, column); }

double Statement::column_double(int column) const { return sqlite3_column_double(stmt_, column); }

std::string Statement::column_text(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  int size = sqlite3_column_bytes(stmt_, column);  // after column_text: the size of the text form
  return text ? std::string(reinterpret_cast<const char*>(text), static_cast<std::size_t>(size)) : std::string();
}

BlobView Statement::column_blob(int column) const {
  BlobView view;
  view.data = sqlite3_column_blob(stmt_, column);
  view.size = static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column));
  return view;
}

bool Statement::column_is_null(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }

// ---- Transaction ------------------------------------------------------------------------------

Transaction::Transaction(Database& db) : db_(db) { db_.exec("BEGIN IMMEDIATE"); }

Transaction::~Transaction() {
  if (done_) return;
  // Never throws: a failed rollback (e.g. the connection already rolled back after an I/O error)
  // leaves nothing to undo.
  sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  db_.exec("COMMIT");
  done_ = true;
}

}  // namespace mumoe::cache
