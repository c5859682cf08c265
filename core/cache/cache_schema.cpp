#include "cache/cache_schema.h"

#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <vector>

#include "cache/analysis_cache.h"

#ifndef MUMOE_VERSION
#define MUMOE_VERSION "unknown"
#endif

namespace mumoe::cache {
namespace {

struct Migration {
  const char* sql;                  // upgrades schema v to v + 1
  std::vector<const char*> tables;  // the tables it creates, for checking an existing file
};

// kMigrations[v] upgrades schema v to v + 1; entry 0 creates schema 1 in an empty database.
// Never edit a released entry: files of that version exist. A new version is one more entry
// (and kSchemaVersion + 1).
const std::array<Migration, kSchemaVersion> kMigrations = {{
    {R"sql(
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE runs (
  id              INTEGER PRIMARY KEY,
  model_hash      TEXT NOT NULL,
  model_path      TEXT NOT NULL,
  data_identity   TEXT NOT NULL,
  data_hash       TEXT NOT NULL,
  layer           TEXT NOT NULL,
  parameters      TEXT NOT NULL,
  sample_count    INTEGER NOT NULL,
  chunk_size      INTEGER NOT NULL,
  input_dim       INTEGER NOT NULL,
  output_dim      INTEGER NOT NULL,
  expert_dims     TEXT NOT NULL,
  attribute_count INTEGER NOT NULL,
  status          TEXT NOT NULL CHECK (status IN ('partial', 'complete')),
  created         TEXT NOT NULL,
  UNIQUE (model_hash, model_path, data_identity, data_hash, layer, parameters)
);
CREATE INDEX runs_by_source ON runs (model_path, layer, data_identity);
CREATE TABLE chunks (
  run_id       INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  chunk_index  INTEGER NOT NULL,
  first_sample INTEGER NOT NULL,
  count        INTEGER NOT NULL,
  labels       BLOB NOT NULL,
  predictions  BLOB NOT NULL,
  scores       BLOB NOT NULL,
  inputs       BLOB NOT NULL,
  attributes   BLOB NOT NULL,
  coef_offsets BLOB NOT NULL,
  coef_indices BLOB NOT NULL,
  coef_values  BLOB NOT NULL,
  PRIMARY KEY (run_id, chunk_index)
);
INSERT INTO meta (key, value) VALUES ('created', strftime('%Y-%m-%dT%H:%M:%SZ', 'now'));
)sql",
     {"meta", "runs", "chunks"}},
    {R"sql(
CREATE TABLE results (
  run_id  INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  kind    TEXT NOT NULL,
  key     TEXT NOT NULL,
  json    TEXT NOT NULL,
  created TEXT NOT NULL,
  PRIMARY KEY (run_id, kind, key)
);
)sql",
     {"results"}},
    // 3: no table changes. Chunks may store their coefficients in the compact forms of
    // chunk_codec.h (float32 values, no indices for full modes), which a schema-2 program would
    // take for damaged rows; the version keeps such programs from reading them.
    {"SELECT 1;", {}},
    // 4: each chunk may leave expert modes to the model (ChunkRecord::left_to_model): their
    // checksums, one little-endian uint64 per mode, or nothing (every mode stored, as before).
    {"ALTER TABLE chunks ADD COLUMN coef_left_to_model BLOB NOT NULL DEFAULT x'';", {}},
}};

std::string hex32(int64_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", static_cast<unsigned>(v & 0xffffffffu));
  return buf;
}

// quick_check's first few complaints on one line, or "ok".
std::string quick_check(const Database& db) {
  Statement s = db.prepare("PRAGMA quick_check(3)");
  std::string out;
  while (s.step()) {
    // A row may hold several lines, the first naming the schema ("*** in database main ***").
    std::string text = s.column_text(0);
    for (std::size_t start = 0; start < text.size();) {
      std::size_t end = std::min(text.find('\n', start), text.size());
      std::string line = text.substr(start, end - start);
      if (!line.empty() && line.rfind("***", 0) != 0) out += (out.empty() ? "" : "; ") + line;
      start = end + 1;
    }
  }
  return out;
}

std::optional<std::string> missing_table(const Database& db, int64_t version) {
  Statement s = db.prepare("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1");
  for (int64_t v = 0; v < version; ++v)
    for (const char* table : kMigrations[v].tables) {
      s.reset();
      s.bind_text(1, table);
      s.step();
      if (s.column_int64(0) == 0) return std::string(table);
    }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> unusable_reason(const Database& db) {
  try {
    const int64_t app = db.query_int("PRAGMA application_id");
    const int64_t version = db.query_int("PRAGMA user_version");
    const int64_t objects = db.query_int("SELECT count(*) FROM sqlite_master");
    if (app != kApplicationId) {
      // sqlite3_open_v2 on a missing or empty file gives exactly this: ours to initialise.
      if (app == 0 && version == 0 && objects == 0) return std::nullopt;
      return "not a mumoe cache (a SQLite database of another program, application_id " + hex32(app) + ")";
    }
    if (version > kSchemaVersion)
      return "schema " + std::to_string(version) + " is newer than " + std::to_string(kSchemaVersion);
    const std::string check = quick_check(db);
    if (check != "ok") return "corrupt: " + check;
    // migrate() sets the application_id and the version in one transaction with the tables.
    if (version < 1) return "corrupt: the mumoe application_id without a schema version";
    if (auto table = missing_table(db, version))
      return "corrupt: schema " + std::to_string(version) + " without its table '" + *table + "'";
    return std::nullopt;
  } catch (const SqliteError& e) {
    if (e.code() == SQLITE_NOTADB) return std::string("not a mumoe cache (not a SQLite database)");
    if (e.code() == SQLITE_CORRUPT) return "corrupt: " + e.problem();
    throw;
  }
}

int migrate(Database& db) {
  if (db.query_int("PRAGMA user_version") >= kSchemaVersion) return kSchemaVersion;
  Transaction tx(db);
  // Read again under the write lock: another process may have migrated the file meanwhile.
  const auto from = static_cast<int>(db.query_int("PRAGMA user_version"));
  if (from >= kSchemaVersion) return from;
  for (int v = from; v < kSchemaVersion; ++v) db.exec(kMigrations[v].sql);
  // PRAGMAs take no parameters; both values are our own integers.
  db.exec("PRAGMA application_id = " + std::to_string(kApplicationId));
  db.exec("PRAGMA user_version = " + std::to_string(kSchemaVersion));
  Statement writer = db.prepare("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)");
  writer.bind_text(1, "writer").bind_text(2, std::string("mumoe-studio ") + MUMOE_VERSION).run();
  if (from > 0) {
    writer.reset();
    writer.bind_text(1, "migrated_from_" + std::to_string(from))
        .bind_text(2, db.query_text("SELECT strftime('%Y-%m-%dT%H:%M:%SZ', 'now')"))
        .run();
  }
  tx.commit();
  return from;
}

}  // namespace mumoe::cache
