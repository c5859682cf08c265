// Database::prepare_cached (core/cache/sqlite_database.h): a statement that has ended goes back
// to the connection and comes out again reset, its bindings cleared; the same SQL used twice at
// once gets two statements; and a statement returned mid-way holds no read transaction.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include "cache/sqlite_database.h"
#include "temp_dir.h"

using namespace mumoe::cache;

TEST(StatementCache, AReusedStatementStartsAfreshWithItsBindingsCleared) {
  testkit::TempDir dir;
  Database db(dir.file("db.sqlite"), SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  db.exec("CREATE TABLE t (k INTEGER PRIMARY KEY, v INTEGER); INSERT INTO t VALUES (1, 10), (2, 20), (3, 30);");
  const std::string sql = "SELECT v FROM t WHERE k >= ?1 ORDER BY k";
  sqlite3_stmt* first_handle = nullptr;
  {
    Statement s = db.prepare_cached(sql);
    s.bind_int64(1, 2);
    ASSERT_TRUE(s.step());
    EXPECT_EQ(s.column_int64(0), 20);  // left mid-way: one more row was ready
    first_handle = sqlite3_next_stmt(db.handle(), nullptr);
  }
  {
    Statement s = db.prepare_cached(sql);
    EXPECT_EQ(sqlite3_next_stmt(db.handle(), nullptr), first_handle);  // the same compiled statement
    EXPECT_EQ(sqlite3_next_stmt(db.handle(), first_handle), nullptr);  // and no other
    // Unbound, ?1 is NULL again, and "k >= NULL" holds for no row: the old binding did not survive.
    EXPECT_FALSE(s.step());
    s.reset();
    s.bind_int64(1, 1);
    int rows = 0;
    while (s.step()) ++rows;
    EXPECT_EQ(rows, 3);  // from the first row: the earlier run did not carry over
  }
}

TEST(StatementCache, TheSameSqlInUseTwiceGetsTwoStatements) {
  testkit::TempDir dir;
  Database db(dir.file("db.sqlite"), SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  db.exec("CREATE TABLE t (k INTEGER PRIMARY KEY, v INTEGER); INSERT INTO t VALUES (1, 10), (2, 20);");
  const std::string sql = "SELECT v FROM t WHERE k = ?1";
  Statement outer = db.prepare_cached(sql);
  outer.bind_int64(1, 1);
  ASSERT_TRUE(outer.step());
  {
    Statement inner = db.prepare_cached(sql);
    inner.bind_int64(1, 2);
    ASSERT_TRUE(inner.step());
    EXPECT_EQ(inner.column_int64(0), 20);
  }
  EXPECT_EQ(outer.column_int64(0), 10);  // untouched by the inner one
}

TEST(StatementCache, AnIdleStatementHoldsNoReadTransaction) {
  // A statement kept mid-way would keep its snapshot: a checkpoint could not complete while it
  // lives. Returned statements are reset, so a full checkpoint of a WAL database goes through.
  testkit::TempDir dir;
  const auto path = dir.file("db.sqlite");
  Database db(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  db.query_text("PRAGMA journal_mode = WAL");
  db.exec("CREATE TABLE t (k INTEGER PRIMARY KEY, v INTEGER); INSERT INTO t VALUES (1, 10), (2, 20);");
  {
    Statement s = db.prepare_cached("SELECT v FROM t ORDER BY k");
    ASSERT_TRUE(s.step());
  }
  Database other(path, SQLITE_OPEN_READWRITE);
  other.exec("INSERT INTO t VALUES (3, 30)");
  EXPECT_FALSE(sqlite3_get_autocommit(db.handle()) == 0) << "a transaction is still open on the first connection";
  int log = -1, checkpointed = -1;
  EXPECT_EQ(sqlite3_wal_checkpoint_v2(other.handle(), nullptr, SQLITE_CHECKPOINT_TRUNCATE, &log, &checkpointed),
            SQLITE_OK);
}
