// A small RAII layer over the SQLite C API: a connection, its prepared statements and a
// transaction guard. Every failure throws SqliteError (a mumoe::FileError naming the database
// file, "sqlite: MESSAGE"), so no caller checks return codes and nothing leaks on an exception.
//
// Not thread-safe: one Database and its Statements belong to one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/errors.h"

struct sqlite3;
struct sqlite3_stmt;

namespace mumoe::cache {

/// A failed SQLite call. what() is "PATH: sqlite: MESSAGE". code() is SQLite's primary result
/// code (SQLITE_CORRUPT, SQLITE_NOTADB, SQLITE_BUSY, …), so callers can tell a damaged file from
/// a problem of the environment.
class SqliteError : public FileError {
 public:
  SqliteError(std::string path, const std::string& message, int code)
      : FileError(std::move(path), "sqlite: " + message), code_(code) {}
  int code() const noexcept { return code_; }

 private:
  int code_;
};

/// A read-only view of a column's bytes, valid until the statement is stepped, reset or destroyed.
struct BlobView {
  const void* data = nullptr;
  std::size_t size = 0;
};

class Statement;

/// One connection to a database file.
class Database {
 public:
  /// Opens `path` with sqlite3_open_v2 and `flags` (SQLITE_OPEN_*). Throws SqliteError.
  Database(std::string path, int flags);
  ~Database();  ///< closes the connection (statements still alive are closed with their owner)
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  const std::string& path() const { return path_; }
  sqlite3* handle() const { return db_; }

  /// Runs one or more SQL statements that return no rows we need.
  void exec(const std::string& sql);
  /// Compiles one SQL statement.
  Statement prepare(const std::string& sql) const;
  /// The same, reusing the compiled statement of an earlier call with the same `sql` that has
  /// ended (the Statement destroyed: reset, bindings cleared, kept for the next call). For the
  /// statements run per chunk: compiling one took 30–45 µs, a quarter of writing a chunk of a
  /// small head (2026-11-27). Closed with the connection; unlike prepare's, such a statement
  /// must not outlive its Database (it returns itself to it).
  Statement prepare_cached(const std::string& sql) const;
  /// The first column of the first row of `sql` as an integer (e.g. "PRAGMA user_version").
  int64_t query_int(const std::string& sql) const;
  /// The first column of the first row of `sql` as text ("" when there is no row).
  std::string query_text(const std::string& sql) const;
  int64_t last_insert_rowid() const;
  /// True when SQLite opened the file read-only (it does so silently for an unwritable file).
  bool read_only() const;

  /// Closing the last connection to a WAL database normally checkpoints the WAL into the file and
  /// deletes it. A file about to be set aside must keep its bytes as they are, so skip that.
  void keep_wal_on_close();

  /// Throws SqliteError with the connection's current error message and `code`.
  [[noreturn]] void fail(int code, const std::string& context) const;

 private:
  friend class Statement;
  std::string path_;
  sqlite3* db_ = nullptr;
  /// prepare_cached's idle statements by SQL (several where the same SQL is in use at once).
  mutable std::unordered_map<std::string, std::vector<sqlite3_stmt*>> idle_;
};

/// A prepared statement. Parameters are 1-based (as in SQL's ?1), columns 0-based.
class Statement {
 public:
  Statement(const Database& db, const std::string& sql);
  ~Statement();
  Statement(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  Statement& operator=(Statement&&) = delete;

  Statement& bind_int64(int index, int64_t value);
  Statement& bind_double(int index, double value);
  Statement& bind_text(int index, const std::string& value);  ///< copied
  /// Not copied: `data` must stay valid until the statement is stepped to the end or reset.
  /// size 0 binds an empty blob (not NULL).
  Statement& bind_blob(int index, const void* data, std::size_t size);

  /// Advances; true when a row is ready to read, false when the statement is done.
  bool step();
  /// Steps to the end (for statements whose rows are not needed).
  void run();
  /// Makes the statement ready to run again and clears its bindings.
  void reset();

  int64_t column_int64(int column) const;
  double column_double(int column) const;
  std::string column_text(int column) const;
  BlobView column_blob(int column) const;
  bool column_is_null(int column) const;

 private:
  friend class Database;
  Statement(const Database& db, const std::string& sql, sqlite3_stmt* compiled);
  void check_bind(int rc, int index);

  const Database* db_;
  sqlite3_stmt* stmt_ = nullptr;
  std::string sql_;
  bool cached_ = false;  ///< from prepare_cached: returned to the database's idle statements
};

/// BEGIN IMMEDIATE … COMMIT. The write lock is taken at the start, so a transaction that reads
/// and then writes cannot fail half-way on a lock another connection took in between. The
/// destructor rolls back unless commit() succeeded.
class Transaction {
 public:
  explicit Transaction(Database& db);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  void commit();

 private:
  Database& db_;
  bool done_ = false;
};

}  // namespace mumoe::cache
