// The edit-session database: edits (with undo state) survive reopening, are keyed by model,
// and a file that is not an edit session is refused without being touched.
#include <gtest/gtest.h>

#include <sqlite3.h>

#include "cache/sqlite_database.h"
#include "editing/edit_session_store.h"
#include "io/errors.h"
#include "temp_dir.h"

namespace mumoe::editing {
namespace {

LogitEdit edit(const std::string& target, double lambda) {
  LogitEdit e;
  e.target = target;
  e.output = 1;
  e.lambda = lambda;
  e.mean_coefficients = {0.25, 0.75};
  e.subpopulation = target + "=1&frame=1";
  return e;
}

TEST(EditSessionStore, KeepsEachModelsStackAcrossReopening) {
  testkit::TempDir dir;
  const auto path = dir.file("edits.sqlite");
  {
    auto store = EditSessionStore::open(path);
    EXPECT_FALSE(store->load("hash-a").has_value());
    EditStack a;
    a.push(edit("x", 128));
    a.push(edit("y", -3));
    a.undo();
    store->save("hash-a", "/models/a.safetensors", a);
    EditStack b;
    b.push(edit("z", 1));
    store->save("hash-b", "/models/b.safetensors", b);
  }
  auto store = EditSessionStore::open(path);
  const auto a = store->load("hash-a");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->model_path, "/models/a.safetensors");
  EXPECT_EQ(a->stack.applied_count(), 1u);
  ASSERT_EQ(a->stack.all().size(), 2u);
  EXPECT_EQ(a->stack.all()[1].lambda, -3);
  EXPECT_EQ(a->stack.applied()[0].mean_coefficients, (std::vector<double>{0.25, 0.75}));
  EXPECT_EQ(store->load("hash-b")->stack.applied()[0].target, "z");
  EXPECT_EQ(store->sessions().size(), 2u);

  // Saving again replaces that model's stack only.
  EditStack a2 = a->stack;
  a2.redo();
  store->save("hash-a", "/moved/a.safetensors", a2);
  EXPECT_EQ(EditSessionStore::open(path)->load("hash-a")->stack.applied_count(), 2u);
  EXPECT_EQ(EditSessionStore::open(path)->load("hash-b")->stack.applied_count(), 1u);
}

TEST(EditSessionStore, RefusesForeignAndGarbageFilesWithoutTouchingThem) {
  testkit::TempDir dir;
  const auto garbage = dir.file("garbage.sqlite");
  testkit::write_bytes(garbage, std::string(4096, 'x'));
  EXPECT_THROW(EditSessionStore::open(garbage), FileError);
  EXPECT_EQ(testkit::read_bytes(garbage), std::string(4096, 'x'));

  // Another application's SQLite database.
  const auto foreign = dir.file("foreign.sqlite");
  {
    cache::Database db(foreign, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    db.exec("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT); INSERT INTO meta VALUES('application', 'other')");
  }
  const auto before = testkit::read_bytes(foreign);
  EXPECT_THROW(EditSessionStore::open(foreign), FileError);
  EXPECT_EQ(testkit::read_bytes(foreign), before);
}

}  // namespace
}  // namespace mumoe::editing
