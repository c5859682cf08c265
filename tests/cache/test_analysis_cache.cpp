// The SQLite analysis cache: chunk round trips, run reuse and invalidation, results, validation,
// files that must be set aside (foreign, garbage, corrupt, newer), migration from schema 1, and a
// writer killed with SIGKILL.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <thread>

#include "cache/analysis_cache.h"
#include "cache/cache_repair.h"
#include "cache_records.h"
#include "io/errors.h"
#include "temp_dir.h"

using namespace mumoe;
using namespace mumoe::cache;
using mumoe::testkit::read_bytes;
using mumoe::testkit::TempDir;
using mumoe::testkit::write_bytes;
using mumoe::testkit::expect_same;
using mumoe::testkit::make_chunk;
using mumoe::testkit::make_info;
using mumoe::testkit::make_key;

namespace {

// Plain SQLite, independent of the implementation, to build and inspect files.
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK)
      throw std::runtime_error("cannot open " + path);
    sqlite3_busy_timeout(db_, 10000);
  }
  ~RawDb() { sqlite3_close(db_); }
  void exec(const std::string& sql) {
    char* error = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
      std::string message = error ? error : "?";
      sqlite3_free(error);
      throw std::runtime_error(message + " in " + sql);
    }
  }
  std::string text(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) != SQLITE_OK)
      throw std::runtime_error(std::string(sqlite3_errmsg(db_)) + " in " + sql);
    std::string out;
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW && sqlite3_column_text(s, 0)) out = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) throw std::runtime_error(std::string(sqlite3_errmsg(db_)) + " in " + sql);
    return out;
  }
  int64_t integer(const std::string& sql) { return std::stoll(text(sql)); }
  // Leaves the WAL as it is when closing, as a crashed writer would.
  void keep_wal() { sqlite3_db_config(db_, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr); }

 private:
  sqlite3* db_ = nullptr;
};

// make_chunk with mode 0 left to the model (ChunkRecord::left_to_model): offsets only.
ChunkRecord chunk_leaving_mode0(const RunInfo& info, int64_t index, uint64_t checksum = 0x1234567890abcdefULL) {
  ChunkRecord c = make_chunk(info, index);
  SparseRows& rows = c.coefficients[0];
  rows.indices.clear();
  rows.values.clear();
  for (int64_t i = 0; i <= c.count; ++i) rows.offsets[static_cast<std::size_t>(i)] = i * info.expert_dims[0];
  c.left_to_model = {checksum, 0};
  return c;
}

bool same_info(const RunInfo& a, const RunInfo& b) {
  return a.sample_count == b.sample_count && a.chunk_size == b.chunk_size && a.input_dim == b.input_dim &&
         a.output_dim == b.output_dim && a.expert_dims == b.expert_dims && a.attribute_count == b.attribute_count;
}

std::string message_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// "<path>.unusable-YYYYmmddTHHMMSSZ", optionally followed by "-N".
bool is_set_aside_name(const std::string& name, const std::string& path) {
  const std::string prefix = path + ".unusable-";
  if (name.rfind(prefix, 0) != 0) return false;
  const std::string stamp = name.substr(prefix.size());
  if (stamp.size() < 16) return false;
  for (std::size_t i = 0; i < 16; ++i) {
    const char want = i == 8 ? 'T' : i == 15 ? 'Z' : 'd';
    if (want == 'd' ? !std::isdigit(static_cast<unsigned char>(stamp[i])) : stamp[i] != want) return false;
  }
  const std::string rest = stamp.substr(16);
  return rest.empty() || (rest.size() > 1 && rest[0] == '-' &&
                          rest.find_first_not_of("0123456789", 1) == std::string::npos);
}

// Opens `path` and expects it to have been set aside with a reason starting with `reason`.
std::string expect_set_aside(const std::string& path, const std::string& reason) {
  CacheOpenReport report;
  auto cache = AnalysisCache::open(path, &report);
  EXPECT_TRUE(report.set_aside);
  EXPECT_TRUE(report.created);
  EXPECT_EQ(report.set_aside_reason.rfind(reason, 0), 0u) << report.set_aside_reason;
  EXPECT_TRUE(is_set_aside_name(report.set_aside_path, path)) << report.set_aside_path;
  // The fresh cache works.
  int64_t run = cache->begin_run(make_key(), make_info());
  cache->put_chunk(run, make_chunk(make_info(), 0));
  EXPECT_EQ(cache->chunk_indices(run), std::vector<int64_t>{0});
  return report.set_aside_path;
}

// A closed cache file with one run and `chunks` chunks (of a run with many samples).
void write_cache(const std::string& path, int64_t chunks) {
  RunInfo info = make_info();
  info.sample_count = chunks * info.chunk_size;
  auto cache = AnalysisCache::open(path);
  int64_t run = cache->begin_run(make_key(), info);
  for (int64_t i = 0; i < chunks; ++i) cache->put_chunk(run, make_chunk(info, i));
}

}  // namespace

TEST(AnalysisCache, CreatesAFreshCacheInMissingDirectories) {
  TempDir dir;
  const std::string path = dir.file("a/b/analysis.sqlite");
  CacheOpenReport report;
  report.set_aside = true;  // open() must reset the report
  auto cache = AnalysisCache::open(path, &report);
  EXPECT_TRUE(report.created);
  EXPECT_FALSE(report.set_aside);
  EXPECT_EQ(report.migrated_from, 0);
  EXPECT_EQ(cache->path(), path);
  EXPECT_TRUE(cache->run_ids().empty());
  RawDb raw(path);
  EXPECT_EQ(raw.integer("PRAGMA application_id"), kApplicationId);
  EXPECT_EQ(raw.integer("PRAGMA user_version"), kSchemaVersion);
  EXPECT_EQ(raw.text("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(raw.integer("PRAGMA page_size"), kPageSize);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN "
                        "('meta', 'runs', 'chunks', 'results')"),
            4);
  EXPECT_FALSE(raw.text("SELECT value FROM meta WHERE key = 'created'").empty());

  cache.reset();
  AnalysisCache::open(path, &report);
  EXPECT_FALSE(report.created);
  EXPECT_FALSE(report.set_aside);
}

TEST(AnalysisCache, UsesAnEmptySqliteFile) {
  TempDir dir;
  const std::string path = dir.file("empty.sqlite");
  write_bytes(path, "");
  CacheOpenReport report;
  AnalysisCache::open(path, &report);
  EXPECT_TRUE(report.created);
  EXPECT_FALSE(report.set_aside);
}

TEST(AnalysisCache, RoundTripsChunksWithEmptyRowsAndAShortLastChunk) {
  TempDir dir;
  const std::string path = dir.file("c.sqlite");
  const RunInfo info = make_info();
  ASSERT_EQ(info.chunk_count(), 3);
  int64_t run = 0;
  {
    auto cache = AnalysisCache::open(path);
    run = cache->begin_run(make_key(), info);
    for (int64_t i : {2, 0, 1}) cache->put_chunk(run, make_chunk(info, i));
    cache->put_chunk(run, make_chunk(info, 1, 3));  // replaces chunk 1
  }
  auto cache = AnalysisCache::open(path);
  EXPECT_EQ(cache->chunk_indices(run), (std::vector<int64_t>{0, 1, 2}));
  for (int64_t i : {0, 2}) expect_same(cache->get_chunk(run, i), make_chunk(info, i));
  expect_same(cache->get_chunk(run, 1), make_chunk(info, 1, 3));
  ChunkRecord last = cache->get_chunk(run, 2);
  EXPECT_EQ(last.count, 2);
  EXPECT_EQ(last.coefficients[0].offsets.size(), 3u);
  // The generator did produce empty rows (offsets repeat) in a stored chunk.
  const std::vector<int64_t> offsets = cache->get_chunk(run, 0).coefficients[0].offsets;
  EXPECT_NE(std::adjacent_find(offsets.begin(), offsets.end()), offsets.end());
  EXPECT_TRUE(same_info(cache->run_info(run), info));
  EXPECT_EQ(cache->run_key(run).parameters, "{}");
  EXPECT_EQ(cache->run_key(run).model_path, "/models/a.safetensors");
}

TEST(AnalysisCache, RoundTripsOneModeWithoutInputsOrAttributes) {
  TempDir dir;
  RunInfo info;
  info.sample_count = 3;
  info.chunk_size = 8;  // one chunk, shorter than chunk_size
  info.output_dim = 4;
  info.expert_dims = {128};
  auto cache = AnalysisCache::open(dir.file("c.sqlite"));
  int64_t run = cache->begin_run(make_key(), info);
  ChunkRecord chunk = make_chunk(info, 0);
  EXPECT_TRUE(chunk.inputs.empty());
  cache->put_chunk(run, chunk);
  expect_same(cache->get_chunk(run, 0), chunk);
  // Every row empty.
  SparseRows none;
  none.offsets = {0, 0, 0, 0};
  chunk.coefficients = {none};
  cache->put_chunk(run, chunk);
  expect_same(cache->get_chunk(run, 0), chunk);
}

// A chunk whose layer inputs are its data's features stores none (ChunkRecord::inputs): an
// empty blob, read back as no inputs; inputs of any other size are still refused.
TEST(AnalysisCache, AChunkWithoutInputsStoresAnEmptyBlob) {
  TempDir dir;
  const std::string path = dir.file("c.sqlite");
  const RunInfo info = make_info();
  ASSERT_GT(info.input_dim, 0);
  auto cache = AnalysisCache::open(path);
  const int64_t run = cache->begin_run(make_key(), info);
  ChunkRecord chunk = make_chunk(info, 0);
  chunk.inputs.clear();
  cache->put_chunk(run, chunk);
  expect_same(cache->get_chunk(run, 0), chunk);
  cache.reset();
  EXPECT_EQ(RawDb(path).integer("SELECT length(inputs) FROM chunks WHERE chunk_index = 0"), 0);
  cache = AnalysisCache::open(path);
  chunk.inputs = {1.f, 2.f};  // neither none nor count × input_dim
  EXPECT_THROW(cache->put_chunk(run, chunk), UsageError);
}

TEST(AnalysisCache, BeginRunReusesTheRunOfTheSameKey) {
  TempDir dir;
  const std::string path = dir.file("c.sqlite");
  const RunInfo info = make_info();
  int64_t run = 0;
  {
    auto cache = AnalysisCache::open(path);
    EXPECT_FALSE(cache->find_run(make_key()).has_value());
    run = cache->begin_run(make_key(), info);
    EXPECT_EQ(cache->begin_run(make_key(), info), run);
    cache->put_chunk(run, make_chunk(info, 1));
    cache->put_result(run, "stats", "all", "{\"n\":1}");
    // Different parameters: a different run.
    EXPECT_NE(cache->begin_run(make_key("m1", "/models/a.safetensors", "fashion-mnist:test", "d1", "head", "{\"x\":1}"),
                               info),
              run);
  }
  auto cache = AnalysisCache::open(path);
  EXPECT_EQ(cache->find_run(make_key()), run);
  EXPECT_EQ(cache->begin_run(make_key(), info), run);
  EXPECT_EQ(cache->chunk_indices(run), std::vector<int64_t>{1});
  expect_same(cache->get_chunk(run, 1), make_chunk(info, 1));
  EXPECT_EQ(cache->get_result(run, "stats", "all"), "{\"n\":1}");
  EXPECT_FALSE(cache->run_complete(run));
  EXPECT_EQ(cache->run_ids().size(), 2u);
}

TEST(AnalysisCache, ARunInfoMismatchDropsChunksAndResults) {
  TempDir dir;
  auto cache = AnalysisCache::open(dir.file("c.sqlite"));
  const RunInfo info = make_info();
  int64_t run = cache->begin_run(make_key(), info);
  cache->put_chunk(run, make_chunk(info, 0));
  cache->put_result(run, "stats", "all", "{}");

  RunInfo other = info;
  other.expert_dims = {5, 4};
  int64_t again = cache->begin_run(make_key(), other);
  EXPECT_EQ(cache->find_run(make_key()), again);
  EXPECT_TRUE(same_info(cache->run_info(again), other));
  EXPECT_TRUE(cache->chunk_indices(again).empty());
  EXPECT_FALSE(cache->get_result(again, "stats", "all").has_value());
  EXPECT_EQ(cache->run_ids(), std::vector<int64_t>{again});
  EXPECT_THROW(cache->get_chunk(again, 0), FileError);
}

TEST(AnalysisCache, AChangedModelOrDataInvalidatesItsOwnRunsOnly) {
  TempDir dir;
  auto cache = AnalysisCache::open(dir.file("c.sqlite"));
  const RunInfo info = make_info();
  const std::string a = "/models/a.safetensors";
  const RunKey old_key = make_key("m1", a);
  const RunKey old_params = make_key("m1", a, "fashion-mnist:test", "d1", "head", "{\"p\":2}");
  const RunKey other_model = make_key("x1", "/models/b.safetensors");
  const RunKey other_layer = make_key("m1", a, "fashion-mnist:test", "d1", "block.1");
  const RunKey other_data = make_key("m1", a, "fashion-mnist:train", "d9");
  std::vector<int64_t> kept;
  for (const RunKey& k : {old_key, old_params, other_model, other_layer, other_data}) {
    int64_t run = cache->begin_run(k, info);
    cache->put_chunk(run, make_chunk(info, 0));
    cache->put_result(run, "stats", "all", "{}");
    kept.push_back(run);
  }
  const std::vector<int64_t> survivors = {kept[2], kept[3], kept[4]};

  // The file a.safetensors changed (new hash).
  int64_t fresh = cache->begin_run(make_key("m2", a), info);
  EXPECT_FALSE(cache->find_run(old_key).has_value());
  EXPECT_FALSE(cache->find_run(old_params).has_value());
  std::vector<int64_t> expected = survivors;
  expected.push_back(fresh);
  EXPECT_EQ(cache->run_ids(), expected);
  for (int64_t run : survivors) {
    EXPECT_EQ(cache->chunk_indices(run), std::vector<int64_t>{0});
    EXPECT_EQ(cache->get_result(run, "stats", "all"), "{}");
  }
  EXPECT_THROW(cache->chunk_indices(kept[0]), UsageError);

  // The data changed (same SPEC, new content hash): the m2 run goes too.
  int64_t newer = cache->begin_run(make_key("m2", a, "fashion-mnist:test", "d2"), info);
  EXPECT_FALSE(cache->find_run(make_key("m2", a)).has_value());
  expected = survivors;
  expected.push_back(newer);
  EXPECT_EQ(cache->run_ids(), expected);
}

TEST(AnalysisCache, CompleteRunRefusesWhileChunksAreMissing) {
  TempDir dir;
  const std::string path = dir.file("c.sqlite");
  const RunInfo info = make_info();
  auto cache = AnalysisCache::open(path);
  int64_t run = cache->begin_run(make_key(), info);
  cache->put_chunk(run, make_chunk(info, 0));
  cache->put_chunk(run, make_chunk(info, 2));
  const std::string message = message_of([&] { cache->complete_run(run); });
  EXPECT_TRUE(contains(message, "missing 1 of 3 chunks (1)")) << message;
  EXPECT_THROW(cache->complete_run(run), UsageError);
  EXPECT_FALSE(cache->run_complete(run));
  cache->put_chunk(run, make_chunk(info, 1));
  cache->complete_run(run);
  EXPECT_TRUE(cache->run_complete(run));
  cache.reset();
  EXPECT_TRUE(AnalysisCache::open(path)->run_complete(run));
}

TEST(AnalysisCache, StoresReplacesAndClearsResults) {
  TempDir dir;
  auto cache = AnalysisCache::open(dir.file("c.sqlite"));
  int64_t run = cache->begin_run(make_key(), make_info());
  int64_t other = cache->begin_run(make_key("x", "/models/b.safetensors"), make_info());
  EXPECT_FALSE(cache->get_result(run, "ablation", "mode0:3,17").has_value());
  cache->put_result(run, "ablation", "mode0:3,17", "{\"acc\":0.5}");
  cache->put_result(run, "ablation", "mode0:3,17", "{\"acc\":0.75}");  // replaces
  cache->put_result(run, "ablation", "mode0:1", "{\"acc\":0.9}");
  cache->put_result(run, "gallery", "3", "[1,2,3]");
  cache->put_result(other, "ablation", "mode0:1", "{\"acc\":0.1}");
  EXPECT_EQ(cache->get_result(run, "ablation", "mode0:3,17"), "{\"acc\":0.75}");
  EXPECT_EQ(cache->get_result(run, "gallery", "3"), "[1,2,3]");
  EXPECT_FALSE(cache->get_result(run, "gallery", "mode0:1").has_value());

  cache->clear_results(run, "ablation");
  EXPECT_FALSE(cache->get_result(run, "ablation", "mode0:3,17").has_value());
  EXPECT_FALSE(cache->get_result(run, "ablation", "mode0:1").has_value());
  EXPECT_EQ(cache->get_result(run, "gallery", "3"), "[1,2,3]");
  EXPECT_EQ(cache->get_result(other, "ablation", "mode0:1"), "{\"acc\":0.1}");
  cache->clear_results(run);
  EXPECT_FALSE(cache->get_result(run, "gallery", "3").has_value());
  EXPECT_EQ(cache->get_result(other, "ablation", "mode0:1"), "{\"acc\":0.1}");
  EXPECT_THROW(cache->put_result(9999, "x", "y", "{}"), UsageError);
}

TEST(AnalysisCache, DeleteRunRemovesItsChunksAndResults) {
  TempDir dir;
  const std::string path = dir.file("c.sqlite");
  auto cache = AnalysisCache::open(path);
  int64_t run = cache->begin_run(make_key(), make_info());
  int64_t other = cache->begin_run(make_key("x", "/models/b.safetensors"), make_info());
  for (int64_t r : {run, other}) {
    cache->put_chunk(r, make_chunk(make_info(), 0));
    cache->put_result(r, "k", "v", "1");
  }
  cache->delete_run(run);
  EXPECT_EQ(cache->run_ids(), std::vector<int64_t>{other});
  RawDb raw(path);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM chunks WHERE run_id = " + std::to_string(run)), 0);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM results WHERE run_id = " + std::to_string(run)), 0);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM chunks"), 1);
}

// Chunks put while a batch is open are stored together at its commit, and not at all when it is
// dropped; another connection sees none of them before the commit. A chunk the batch refuses
// leaves the ones before it for the commit.
TEST(AnalysisCache, AChunkBatchStoresItsChunksTogetherOrNotAtAll) {
  TempDir dir;
  const std::string path = dir.file("c.sqlite");
  auto cache = AnalysisCache::open(path);
  const RunInfo info = make_info();
  const int64_t run = cache->begin_run(make_key(), info);
  {
    AnalysisCache::ChunkBatch dropped(*cache);
    cache->put_chunk(run, make_chunk(info, 0));
    cache->put_chunk(run, make_chunk(info, 1));
  }
  EXPECT_TRUE(cache->chunk_indices(run).empty());
  {
    AnalysisCache::ChunkBatch batch(*cache);
    EXPECT_THROW(AnalysisCache::ChunkBatch{*cache}, std::logic_error);  // one at a time
    // Other writes would join the batch (and its rollback): refused while it is open.
    EXPECT_THROW(cache->put_result(run, "k", "v", "1"), std::logic_error);
    EXPECT_THROW(cache->delete_run(run), std::logic_error);
    cache->put_chunk(run, make_chunk(info, 0));
    cache->put_chunk(run, make_chunk(info, 1, 5));
    ChunkRecord bad = make_chunk(info, 2);
    bad.labels.pop_back();  // one label short: refused
    EXPECT_THROW(cache->put_chunk(run, bad), UsageError);
    EXPECT_EQ(RawDb(path).integer("SELECT count(*) FROM chunks"), 0);  // nothing committed yet
    batch.commit();
    EXPECT_THROW(batch.commit(), std::logic_error);
  }
  EXPECT_EQ(cache->chunk_indices(run), (std::vector<int64_t>{0, 1}));
  expect_same(cache->get_chunk(run, 1), make_chunk(info, 1, 5));
  // After the commit a put has its own transaction again, and other writes work.
  cache->put_chunk(run, make_chunk(info, 2));
  EXPECT_EQ(RawDb(path).integer("SELECT count(*) FROM chunks"), 3);
  cache->put_result(run, "k", "v", "1");
}

TEST(AnalysisCache, UnknownRunIdsAreUsageErrors) {
  TempDir dir;
  auto cache = AnalysisCache::open(dir.file("c.sqlite"));
  EXPECT_THROW(cache->run_info(42), UsageError);
  EXPECT_THROW(cache->run_key(42), UsageError);
  EXPECT_THROW(cache->run_complete(42), UsageError);
  EXPECT_THROW(cache->complete_run(42), UsageError);
  EXPECT_THROW(cache->chunk_indices(42), UsageError);
  EXPECT_THROW(cache->put_chunk(42, make_chunk(make_info(), 0)), UsageError);
  EXPECT_THROW(cache->get_chunk(42, 0), UsageError);
  RunInfo bad = make_info();
  bad.chunk_size = 0;
  EXPECT_THROW(cache->begin_run(make_key(), bad), UsageError);
  bad = make_info();
  bad.expert_dims = {5, 0};
  EXPECT_TRUE(contains(message_of([&] { cache->begin_run(make_key(), bad); }), "expert_dims[1]"));
  EXPECT_TRUE(cache->run_ids().empty());
}

TEST(AnalysisCache, PutChunkRejectsBadRecordsAndLeavesTheCacheUnchanged) {
  TempDir dir;
  const std::string path = dir.file("c.sqlite");
  const RunInfo info = make_info();
  auto cache = AnalysisCache::open(path);
  int64_t run = cache->begin_run(make_key(), info);
  cache->put_chunk(run, make_chunk(info, 0));
  const std::string before = read_bytes(path) + read_bytes(path + "-wal");

  struct Case {
    const char* field;
    std::function<void(ChunkRecord&)> damage;
  };
  const std::vector<Case> cases = {
      {"chunk_index", [](ChunkRecord& c) { c.chunk_index = 3; }},
      {"first_sample", [](ChunkRecord& c) { c.first_sample = 1; }},
      {"count", [](ChunkRecord& c) { c.count = 3; }},
      {"labels", [](ChunkRecord& c) { c.labels.pop_back(); }},
      {"predictions", [](ChunkRecord& c) { c.predictions.push_back(1); }},
      {"scores", [](ChunkRecord& c) { c.scores.pop_back(); }},
      {"inputs", [](ChunkRecord& c) { c.inputs.push_back(1.f); }},
      {"attributes", [](ChunkRecord& c) { c.attributes.pop_back(); }},
      {"attributes: byte 1 is 2", [](ChunkRecord& c) { c.attributes[1] = 2; }},
      {"coefficients: has 1 entries, expected 2", [](ChunkRecord& c) { c.coefficients.pop_back(); }},
      {"coefficients[0].offsets: has 4", [](ChunkRecord& c) { c.coefficients[0].offsets.pop_back(); }},
      {"coefficients[1].offsets: offsets[0] is 1",
       [](ChunkRecord& c) {
         for (auto& o : c.coefficients[1].offsets) ++o;
         c.coefficients[1].indices.insert(c.coefficients[1].indices.begin(), 0);
         c.coefficients[1].values.insert(c.coefficients[1].values.begin(), 1.0);
       }},
      {"coefficients[0].offsets: decrease at row 1",
       [](ChunkRecord& c) {
         auto& o = c.coefficients[0].offsets;
         o[2] = o[1] - 1 >= 0 ? o[1] - 1 : 0;
         o[1] = o[2] + 1;
       }},
      {"coefficients[0].indices: has", [](ChunkRecord& c) { c.coefficients[0].indices.push_back(4); }},
      {"coefficients[0].values: has", [](ChunkRecord& c) { c.coefficients[0].values.pop_back(); }},
      {"coefficients[0].indices: expert 5 in row", [](ChunkRecord& c) { c.coefficients[0].indices.back() = 5; }},
      {"coefficients[1].indices: expert -1", [](ChunkRecord& c) { c.coefficients[1].indices.front() = -1; }},
      {"coefficients[0].indices: not increasing",
       [](ChunkRecord& c) {
         auto& r = c.coefficients[0];
         // the first row with two entries gets them in the wrong order
         for (std::size_t i = 0; i + 1 < r.offsets.size(); ++i)
           if (r.offsets[i + 1] - r.offsets[i] >= 2) {
             std::swap(r.indices[r.offsets[i]], r.indices[r.offsets[i] + 1]);
             break;
           }
       }},
      {"coefficients[1].values: entry 0", [](ChunkRecord& c) { c.coefficients[1].values[0] = 0.0; }},
      {"coefficients[1].values: entry 1", [](ChunkRecord& c) { c.coefficients[1].values[1] = std::nan(""); }},
      {"coefficients[1].values: entry 1 (row 2) is inf",
       [](ChunkRecord& c) { c.coefficients[1].values[1] = std::numeric_limits<double>::infinity(); }},
      {"coefficients[0].values: entry 1 (row 0) is -",
       [](ChunkRecord& c) { c.coefficients[0].values[1] = -0.25; }},
      {"scores: value 3 is not finite", [](ChunkRecord& c) { c.scores[3] = std::nan(""); }},
      {"scores: value 0 is not finite",
       [](ChunkRecord& c) { c.scores[0] = -std::numeric_limits<double>::infinity(); }},
      {"left_to_model: has 1 entries, expected 2", [](ChunkRecord& c) { c.left_to_model = {7}; }},
      {"coefficients[0].offsets: offsets[1] is",  // a mode left to the model must be full
       [](ChunkRecord& c) { c.left_to_model = {7, 0}; }},
      {"coefficients[1].values: a mode left to the model stores none",
       [&info](ChunkRecord& c) {
         for (int64_t i = 0; i <= c.count; ++i) c.coefficients[1].offsets[i] = i * info.expert_dims[1];
         c.coefficients[1].indices.assign(c.count * 3, 0);
         c.coefficients[1].values.assign(c.count * 3, 0.5);
         c.left_to_model = {0, 7};
       }},
  };
  for (const Case& test : cases) {
    ChunkRecord chunk = make_chunk(info, 0, 1);
    test.damage(chunk);
    std::string message;
    try {
      cache->put_chunk(run, chunk);
    } catch (const UsageError& e) {
      message = e.what();
    }
    EXPECT_TRUE(contains(message, test.field)) << "case '" << test.field << "': " << message;
    EXPECT_TRUE(contains(message, "chunk ")) << message;
  }
  EXPECT_EQ(cache->chunk_indices(run), std::vector<int64_t>{0});
  expect_same(cache->get_chunk(run, 0), make_chunk(info, 0));
  EXPECT_EQ(read_bytes(path) + read_bytes(path + "-wal"), before);  // not a byte written
}

TEST(AnalysisCache, GetChunkRejectsDamagedRows) {
  TempDir dir;
  const std::string path = dir.file("c.sqlite");
  const RunInfo info = make_info();
  int64_t run = 0;
  {
    auto cache = AnalysisCache::open(path);
    run = cache->begin_run(make_key(), info);
    for (int64_t i = 0; i < 3; ++i) cache->put_chunk(run, make_chunk(info, i));
  }
  {
    RawDb raw(path);
    // chunk 0: inputs one float short; chunk 1: a decreasing offset; chunk 2: expert index 7 >= 5.
    raw.exec("UPDATE chunks SET inputs = substr(inputs, 1, length(inputs) - 4) WHERE chunk_index = 0");
    raw.exec("UPDATE chunks SET coef_offsets = x'" + std::string("0000000000000000") + "0300000000000000" +
             "0100000000000000" + "0300000000000000" + "0300000000000000" + std::string(5 * 16, '0') +
             "' WHERE chunk_index = 1");
    raw.exec("UPDATE chunks SET coef_indices = x'07000000' || substr(coef_indices, 5) WHERE chunk_index = 2");
  }
  auto cache = AnalysisCache::open(path);
  const std::string run_text = "run " + std::to_string(run);
  const std::vector<std::pair<int64_t, std::string>> expected = {
      {0, "inputs: 44 bytes, expected 12 × 4 = 48"},
      {1, "coefficients[0].offsets: decrease at row 1"},
      {2, "coefficients[0].indices: expert 7"},
      {5, "not in the cache"}};
  for (const auto& [chunk, phrase] : expected) {
    try {
      cache->get_chunk(run, chunk);
      ADD_FAILURE() << "no error for chunk " << chunk;
    } catch (const FileError& e) {
      EXPECT_EQ(e.path(), path);
      EXPECT_TRUE(contains(e.what(), run_text + ", chunk " + std::to_string(chunk) + ": ")) << e.what();
      EXPECT_TRUE(contains(e.what(), phrase)) << e.what();
    }
  }
}

// A softmax-like mode (every row holds every expert) with float32 values, beside a sparse mode:
// stored without the full mode's indices and with 4-byte values, read back equal; the same chunk
// in the explicit form (every index, float64 values: what schema 2 wrote) reads back equal too;
// a value that is not a float keeps 8 bytes; blobs of neither size are damage.
TEST(AnalysisCache, StoresFullModesAndFloatValuesCompactly) {
  TempDir dir;
  const std::string path = dir.file("c.sqlite");
  RunInfo info = make_info();  // chunks of 4, the last of 2; modes of 5 and 3 experts
  const auto compact_chunk = [&](int64_t index, double extra) {
    ChunkRecord c = make_chunk(info, index);
    SparseRows full;
    full.offsets.push_back(0);
    for (int64_t i = 0; i < c.count; ++i) {
      for (int32_t e = 0; e < 5; ++e) {
        full.indices.push_back(e);
        full.values.push_back(static_cast<double>(0.1f * static_cast<float>(e + 1) + static_cast<float>(i)));
      }
      full.offsets.push_back(static_cast<int64_t>(full.indices.size()));
    }
    c.coefficients[0] = full;
    for (auto& v : c.coefficients[1].values) v = static_cast<double>(static_cast<float>(v));
    if (extra != 0) c.coefficients[1].values.back() = extra;
    return c;
  };
  const ChunkRecord floats = compact_chunk(0, 0);
  const ChunkRecord not_floats = compact_chunk(1, 0.1);  // 0.1 is no float
  const ChunkRecord last = compact_chunk(2, 0);
  int64_t run = 0;
  {
    auto cache = AnalysisCache::open(path);
    run = cache->begin_run(make_key(), info);
    for (const auto* c : {&floats, &not_floats, &last}) cache->put_chunk(run, *c);
  }
  const auto mode1_nnz = [](const ChunkRecord& c) { return static_cast<int64_t>(c.coefficients[1].indices.size()); };
  ASSERT_GT(mode1_nnz(floats), 0);
  {
    RawDb raw(path);
    const auto bytes = [&](const char* column, int chunk) {
      return raw.integer(std::string("SELECT length(") + column + ") FROM chunks WHERE chunk_index = " +
                         std::to_string(chunk));
    };
    EXPECT_EQ(bytes("coef_indices", 0), 4 * mode1_nnz(floats));  // mode 0's 4 × 5 implied
    EXPECT_EQ(bytes("coef_values", 0), 4 * (20 + mode1_nnz(floats)));
    EXPECT_EQ(bytes("coef_indices", 1), 4 * mode1_nnz(not_floats));
    EXPECT_EQ(bytes("coef_values", 1), 8 * (20 + mode1_nnz(not_floats)));
    EXPECT_EQ(bytes("coef_values", 2), 4 * (10 + mode1_nnz(last)));
  }
  {
    auto cache = AnalysisCache::open(path);
    expect_same(cache->get_chunk(run, 0), floats);
    expect_same(cache->get_chunk(run, 1), not_floats);
    expect_same(cache->get_chunk(run, 2), last);
  }
  {
    // Chunk 0 rewritten in the explicit form by hand: every index, little-endian int32, and
    // every value as float64.
    const auto hex = [](const void* data, std::size_t size) {
      static const char* digits = "0123456789abcdef";
      std::string out;
      for (std::size_t i = 0; i < size; ++i) {
        const auto b = static_cast<const unsigned char*>(data)[i];
        out += digits[b >> 4];
        out += digits[b & 15];
      }
      return out;
    };
    std::vector<int32_t> indices;
    std::vector<double> values;
    for (const auto& mode : floats.coefficients) {
      indices.insert(indices.end(), mode.indices.begin(), mode.indices.end());
      values.insert(values.end(), mode.values.begin(), mode.values.end());
    }
    RawDb raw(path);
    raw.exec("UPDATE chunks SET coef_indices = x'" + hex(indices.data(), indices.size() * 4) + "', coef_values = x'" +
             hex(values.data(), values.size() * 8) + "' WHERE chunk_index = 0");
    // Chunk 1: indices neither all nor the sparse mode's; chunk 2: values 2 bytes short.
    raw.exec("UPDATE chunks SET coef_indices = coef_indices || x'00000000' WHERE chunk_index = 1");
    raw.exec("UPDATE chunks SET coef_values = substr(coef_values, 3) WHERE chunk_index = 2");
  }
  auto cache = AnalysisCache::open(path);
  expect_same(cache->get_chunk(run, 0), floats);

  // One full mode only (a softmax head): no index bytes at all.
  RunInfo one = info;
  one.expert_dims = {5};
  ChunkRecord softmax = compact_chunk(0, 0);
  softmax.coefficients.resize(1);
  const int64_t one_run = cache->begin_run(make_key("m2", "/models/softmax.safetensors"), one);
  cache->put_chunk(one_run, softmax);
  EXPECT_EQ(RawDb(path).integer("SELECT length(coef_indices) FROM chunks WHERE run_id = " + std::to_string(one_run)), 0);
  expect_same(cache->get_chunk(one_run, 0), softmax);

  for (const auto& [chunk, phrase] : std::vector<std::pair<int64_t, std::string>>{
           {1, "coef_indices: " + std::to_string(4 * (mode1_nnz(not_floats) + 1)) + " bytes"},
           {2, "coef_values: "}}) {
    try {
      cache->get_chunk(run, chunk);
      ADD_FAILURE() << "no error for chunk " << chunk;
    } catch (const FileError& e) {
      EXPECT_TRUE(contains(e.what(), phrase)) << e.what();
    }
  }
}

// Which values are stored as 4 bytes: exactly those that are floats. A value beyond float's range,
// one that float would flush to 0 and one between two floats keep 8 bytes; float's smallest
// subnormal and largest finite value are floats. Each reads back equal.
TEST(AnalysisCache, StoresFourByteValuesExactlyWhenEveryValueIsAFloat) {
  TempDir dir;
  const std::string path = dir.file("c.sqlite");
  RunInfo info = make_info();  // three chunks
  const double not_floats[] = {1e300, 1e-50, 1.0 + 1e-12};
  const double floats[] = {static_cast<double>(std::numeric_limits<float>::denorm_min()),
                           static_cast<double>(std::numeric_limits<float>::max()), 0.5};
  auto cache = AnalysisCache::open(path);
  const int64_t run = cache->begin_run(make_key(), info);
  RawDb raw(path);
  for (int i = 0; i < 3; ++i) {
    for (const double extra : {not_floats[i], floats[i]}) {
      ChunkRecord c = make_chunk(info, i);
      for (auto& mode : c.coefficients)
        for (auto& v : mode.values) v = static_cast<double>(static_cast<float>(v));
      c.coefficients[0].values.front() = extra;
      cache->put_chunk(run, c);
      const int64_t entries = static_cast<int64_t>(c.coefficients[0].values.size() + c.coefficients[1].values.size());
      const int64_t bytes = raw.integer("SELECT length(coef_values) FROM chunks WHERE chunk_index = " + std::to_string(i));
      EXPECT_EQ(bytes, (extra == floats[i] ? 4 : 8) * entries) << "value " << extra;
      expect_same(cache->get_chunk(run, i), c);
    }
  }
}

// Sets $MUMOE_CACHE for one test, so that its directory is "the program's own cache directory".
class ScopedCacheEnv {
 public:
  explicit ScopedCacheEnv(const std::string& path) {
    if (const char* old = std::getenv("MUMOE_CACHE")) old_ = old;
    ::setenv("MUMOE_CACHE", path.c_str(), 1);
  }
  ~ScopedCacheEnv() {
    if (old_) ::setenv("MUMOE_CACHE", old_->c_str(), 1);
    else ::unsetenv("MUMOE_CACHE");
  }

 private:
  std::optional<std::string> old_;
};

// A chunk may leave a dense mode to the model (schema 4): it stores the mode's offsets and
// checksum but none of its indices or values, reads back as it was written, and beside it a
// stored mode keeps its own form (sparse float64; full float32 without indices). A checksums
// blob of the wrong size is damage.
TEST(AnalysisCache, StoresAModeLeftToTheModelAsOffsetsAndChecksumOnly) {
  TempDir dir;
  const std::string path = dir.file("c.sqlite");
  const RunInfo info = make_info();  // modes of 5 and 3 experts
  const ChunkRecord left = chunk_leaving_mode0(info, 0);
  const ChunkRecord stored = make_chunk(info, 1);
  // Beside a stored mode that is full and float32 (both compact forms of schema 3 at once).
  ChunkRecord left_beside_full = chunk_leaving_mode0(info, 2);
  SparseRows& full = left_beside_full.coefficients[1];
  full = SparseRows{};
  full.offsets.push_back(0);
  for (int64_t i = 0; i < left_beside_full.count; ++i) {
    for (int32_t e = 0; e < 3; ++e) {
      full.indices.push_back(e);
      full.values.push_back(0.25 * (e + 1) + static_cast<double>(i));
    }
    full.offsets.push_back(static_cast<int64_t>(full.indices.size()));
  }
  int64_t run = 0;
  {
    auto cache = AnalysisCache::open(path);
    run = cache->begin_run(make_key(), info);
    cache->put_chunk(run, left);
    cache->put_chunk(run, stored);
    cache->put_chunk(run, left_beside_full);
    expect_same(cache->get_chunk(run, 0), left);
    expect_same(cache->get_chunk(run, 1), stored);
    expect_same(cache->get_chunk(run, 2), left_beside_full);
  }
  {
    RawDb raw(path);
    const auto mode1 = static_cast<int64_t>(left.coefficients[1].values.size());
    EXPECT_EQ(raw.integer("SELECT length(coef_values) FROM chunks WHERE chunk_index = 0"), 8 * mode1);
    EXPECT_EQ(raw.integer("SELECT length(coef_indices) FROM chunks WHERE chunk_index = 0"), 4 * mode1);
    EXPECT_EQ(raw.integer("SELECT length(coef_left_to_model) FROM chunks WHERE chunk_index = 0"), 16);
    EXPECT_EQ(raw.integer("SELECT length(coef_left_to_model) FROM chunks WHERE chunk_index = 1"), 0);
    EXPECT_EQ(raw.integer("SELECT length(coef_indices) FROM chunks WHERE chunk_index = 2"), 0);
    EXPECT_EQ(raw.integer("SELECT length(coef_values) FROM chunks WHERE chunk_index = 2"), 4 * 2 * 3);
    raw.exec("UPDATE chunks SET coef_left_to_model = x'01020304' WHERE chunk_index = 0");
  }
  auto cache = AnalysisCache::open(path);
  try {
    cache->get_chunk(run, 0);
    ADD_FAILURE() << "no error";
  } catch (const FileError& e) {
    EXPECT_TRUE(contains(e.what(), "chunk 0: coef_left_to_model: 4 bytes, expected 2 × 8")) << e.what();
  }
  expect_same(cache->get_chunk(run, 1), stored);
}

// A file at a --cache path that is not one of our caches is the user's: refused, not moved.
void expect_refused_untouched(const std::string& path, const std::string& phrase) {
  const std::string original = read_bytes(path);
  try {
    AnalysisCache::open(path);
    ADD_FAILURE() << "opened " << path;
  } catch (const FileError& e) {
    EXPECT_TRUE(contains(e.what(), path)) << e.what();
    EXPECT_TRUE(contains(e.what(), "is not a mumoe analysis cache")) << e.what();
    EXPECT_TRUE(contains(e.what(), phrase)) << e.what();
  }
  EXPECT_EQ(read_bytes(path), original);
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(path).parent_path()))
    EXPECT_FALSE(contains(entry.path().string(), ".unusable-")) << entry.path();
}

// A sound file with damaged rows: check names each one, repair drops exactly those (a chunk, a
// result, a run marked complete with a chunk missing), keeps the rest, and re-extraction of the
// dropped chunks completes the run again.
TEST(CacheRepair, FindsAndDropsDamagedRowsOnly) {
  TempDir dir;
  const std::string path = dir.file("c.sqlite");
  const RunInfo info = make_info();
  int64_t damaged = 0, missing = 0, sound = 0;
  {
    auto cache = AnalysisCache::open(path);
    damaged = cache->begin_run(make_key("m1"), info);
    missing = cache->begin_run(make_key("m2", "/models/b.safetensors"), info);
    sound = cache->begin_run(make_key("m3", "/models/c.safetensors"), info);
    for (int64_t run : {damaged, missing, sound}) {
      for (int64_t i = 0; i < 3; ++i) cache->put_chunk(run, make_chunk(info, i));
      cache->complete_run(run);
      cache->put_result(run, "statistics", "good", R"({"ok":true})");
    }
    cache->put_result(damaged, "ablation", "bad", "{not json");
  }
  {
    RawDb raw(path);
    raw.exec("UPDATE chunks SET labels = x'0102' WHERE chunk_index = 1 AND run_id = " + std::to_string(damaged));
    raw.exec("DELETE FROM chunks WHERE chunk_index = 2 AND run_id = " + std::to_string(missing));
  }
  auto cache = AnalysisCache::open(path);
  const auto checked = check_cache(*cache, /*repair=*/false);
  EXPECT_EQ(checked.runs, 3);
  EXPECT_EQ(checked.chunks, 8);
  EXPECT_EQ(checked.results, 4);
  ASSERT_EQ(checked.problems.size(), 3u);
  EXPECT_EQ(checked.problems[0].run_id, damaged);
  EXPECT_EQ(checked.problems[0].where, "chunk 1");
  EXPECT_TRUE(contains(checked.problems[0].problem, "labels")) << checked.problems[0].problem;
  EXPECT_FALSE(contains(checked.problems[0].problem, "chunk 1")) << checked.problems[0].problem;  // named once, by where
  EXPECT_EQ(checked.problems[1].where, "result ablation/bad");
  EXPECT_EQ(checked.problems[2].run_id, missing);
  EXPECT_TRUE(contains(checked.problems[2].problem, "1 of 3 chunks are missing")) << checked.problems[2].problem;
  EXPECT_TRUE(cache->run_complete(missing));  // checking changes nothing

  const auto repaired = check_cache(*cache, /*repair=*/true);
  EXPECT_EQ(repaired.problems.size(), 3u);
  EXPECT_TRUE(check_cache(*cache, false).sound());
  EXPECT_EQ(cache->chunk_indices(damaged), (std::vector<int64_t>{0, 2}));
  EXPECT_FALSE(cache->run_complete(damaged));
  EXPECT_FALSE(cache->run_complete(missing));
  EXPECT_TRUE(cache->run_complete(sound));
  EXPECT_FALSE(cache->get_result(damaged, "ablation", "bad"));
  EXPECT_TRUE(cache->get_result(damaged, "statistics", "good"));
  expect_same(cache->get_chunk(sound, 1), make_chunk(info, 1));
  // What an extraction does next: the dropped chunks only, then the runs are complete again.
  cache->put_chunk(damaged, make_chunk(info, 1));
  cache->put_chunk(missing, make_chunk(info, 2));
  cache->complete_run(damaged);
  cache->complete_run(missing);
  expect_same(cache->get_chunk(damaged, 0), make_chunk(info, 0));
}

// A backbone model's run (its key's parameters carry the backbone, as extraction writes them)
// must store its layer's inputs: a chunk whose inputs blob was emptied — damage the chunk's own
// checks accept, since no inputs is a valid chunk of a head on features — is named and dropped
// alone, and so is every chunk when all lost them. A head's run is sound with none, and with a mix
// (a run begun before heads stopped storing them, completed after).
TEST(CacheRepair, ABackboneRunsChunkWithoutInputsIsDamaged) {
  TempDir dir;
  const std::string path = dir.file("c.sqlite");
  auto cache = AnalysisCache::open(path);
  const RunInfo info = make_info();
  const auto backbone_key = [](const std::string& layer) {
    return make_key("m1", "/models/a.safetensors", "fashion-mnist:test", "d1", layer,
                    R"({"backbone":{"kind":"small_cnn"},"chunk_size":4})");
  };
  const auto add_run = [&](const RunKey& key, const std::vector<bool>& with_inputs) {
    const int64_t run = cache->begin_run(key, info);
    for (int64_t i = 0; i < 3; ++i) {
      auto chunk = make_chunk(info, i);
      if (!with_inputs[static_cast<size_t>(i)]) chunk.inputs.clear();
      cache->put_chunk(run, chunk);
    }
    cache->complete_run(run);
    return run;
  };
  const int64_t one_lost = add_run(backbone_key("one"), {true, false, true});
  const int64_t all_lost = add_run(backbone_key("all"), {false, false, false});
  const int64_t head_mixed = add_run(make_key("m1", "/models/a.safetensors", "fashion-mnist:test", "d1", "head",
                                              R"({"chunk_size":4})"),
                                     {true, false, false});

  EXPECT_TRUE(check_run(*cache, head_mixed, /*repair=*/false).sound());
  const auto checked = check_run(*cache, one_lost, /*repair=*/false);
  ASSERT_EQ(checked.problems.size(), 1u);
  EXPECT_EQ(checked.problems[0].where, "chunk 1");
  EXPECT_NE(checked.problems[0].problem.find("stores no layer inputs"), std::string::npos) << checked.problems[0].problem;
  EXPECT_EQ(cache->chunk_indices(one_lost), (std::vector<int64_t>{0, 1, 2}));  // only checked
  EXPECT_EQ(check_run(*cache, all_lost, /*repair=*/false).problems.size(), 3u);

  const auto repaired = check_cache(*cache, /*repair=*/true);
  EXPECT_EQ(repaired.problems.size(), 4u);
  EXPECT_EQ(cache->chunk_indices(one_lost), (std::vector<int64_t>{0, 2}));
  EXPECT_FALSE(cache->run_complete(one_lost));
  EXPECT_TRUE(cache->chunk_indices(all_lost).empty());
  EXPECT_EQ(cache->chunk_indices(head_mixed), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_TRUE(check_cache(*cache, /*repair=*/false).sound());
}

TEST(CacheRepair, AValidatorDropsChunksTheCallerRefuses) {
  TempDir dir;
  auto cache = AnalysisCache::open(dir.file("c.sqlite"));
  const RunInfo info = make_info();
  const int64_t run = cache->begin_run(make_key(), info);
  for (int64_t i = 0; i < 3; ++i) cache->put_chunk(run, make_chunk(info, i));
  cache->complete_run(run);
  const auto report = check_run(*cache, run, /*repair=*/true, [](const ChunkRecord& c) {
    return c.chunk_index == 2 ? std::string("label 9 outside the model's 4 classes") : std::string();
  });
  ASSERT_EQ(report.problems.size(), 1u);
  EXPECT_EQ(report.problems[0].where, "chunk 2");
  EXPECT_EQ(cache->chunk_indices(run), (std::vector<int64_t>{0, 1}));
  EXPECT_FALSE(cache->run_complete(run));
}

TEST(AnalysisCache, RefusesAForeignSqliteFileAndLeavesItInPlace) {
  TempDir dir;
  const std::string path = dir.file("c.sqlite");
  {
    RawDb raw(path);
    raw.exec("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT); INSERT INTO notes (text) VALUES ('mine')");
  }
  expect_refused_untouched(path, "another program");
  EXPECT_EQ(RawDb(path).text("SELECT text FROM notes"), "mine");
}

TEST(AnalysisCache, RefusesASqliteFileOfAnotherApplication) {
  TempDir dir;
  const std::string path = dir.file("c.sqlite");
  RawDb(path).exec("PRAGMA application_id = 4660");  // no tables, but someone else's file
  expect_refused_untouched(path, "0x00001234");
}

TEST(AnalysisCache, RefusesGarbageAndFifos) {
  TempDir dir;
  const std::string notes = dir.file("notes.txt");
  write_bytes(notes, "this is not a database, but somebody's notes\n");
  expect_refused_untouched(notes, "not a SQLite database");
  const std::string fifo = dir.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  try {
    AnalysisCache::open(fifo);
    ADD_FAILURE() << "opened a FIFO";
  } catch (const FileError& e) {
    EXPECT_TRUE(contains(e.what(), "FIFO")) << e.what();
  }
}

TEST(AnalysisCache, SetsAsideGarbageInItsOwnDirectory) {
  TempDir dir;
  ScopedCacheEnv env(dir.file("analysis.sqlite"));  // this directory holds nothing but caches
  std::mt19937 rng(7);
  for (std::size_t size : {5, 100, 8192}) {
    const std::string path = dir.file("garbage-" + std::to_string(size) + ".sqlite");
    std::string bytes(size, '\0');
    for (char& b : bytes) b = static_cast<char>(rng());
    write_bytes(path, bytes);
    const std::string aside = expect_set_aside(path, "not a mumoe cache (not a SQLite database)");
    EXPECT_EQ(read_bytes(aside), bytes) << size;
  }
}

TEST(AnalysisCache, SetsAsideACorruptCache) {
  TempDir dir;
  const std::string path = dir.file("c.sqlite");
  write_cache(path, 60);
  ASSERT_FALSE(std::filesystem::exists(path + "-wal"));  // closing checkpointed everything
  int64_t page_size = 0, root = 0;
  {
    RawDb raw(path);
    page_size = raw.integer("PRAGMA page_size");
    root = raw.integer("SELECT rootpage FROM sqlite_master WHERE name = 'chunks'");
  }
  ASSERT_GT(root, 1);
  // Clobber the b-tree page header of the chunks table's root page: its page type and cell count.
  std::string bytes = read_bytes(path);
  ASSERT_GE(static_cast<int64_t>(bytes.size()), root * page_size);
  for (int64_t k = 0; k < 8; ++k) bytes[(root - 1) * page_size + k] = static_cast<char>(0xEE);
  write_bytes(path, bytes);
  const std::string aside = expect_set_aside(path, "corrupt: ");
  EXPECT_EQ(read_bytes(aside), bytes);
  CacheOpenReport report;
  AnalysisCache::open(path, &report);  // the fresh cache is fine
  EXPECT_FALSE(report.set_aside) << report.set_aside_reason;
}

TEST(AnalysisCache, SetsAsideACacheWithANewerSchema) {
  TempDir dir;
  const std::string path = dir.file("c.sqlite");
  write_cache(path, 1);
  {
    // The new version lives only in the WAL: set aside without its WAL, the file would read as
    // the current schema, and the WAL left behind would be replayed into the fresh cache.
    RawDb raw(path);
    raw.exec("PRAGMA user_version = 99");
    raw.keep_wal();
  }
  ASSERT_GT(std::filesystem::file_size(path + "-wal"), 0u);
  CacheOpenReport report;
  auto cache = AnalysisCache::open(path, &report);
  EXPECT_TRUE(report.set_aside);
  EXPECT_EQ(report.set_aside_reason, "schema 99 is newer than " + std::to_string(kSchemaVersion));
  EXPECT_TRUE(std::filesystem::exists(report.set_aside_path + "-wal"));
  EXPECT_EQ(RawDb(report.set_aside_path).integer("PRAGMA user_version"), 99);
  EXPECT_EQ(RawDb(report.set_aside_path).integer("SELECT count(*) FROM chunks"), 1);
  EXPECT_TRUE(cache->run_ids().empty());
  cache.reset();
  EXPECT_EQ(RawDb(path).integer("PRAGMA user_version"), kSchemaVersion);
}

TEST(AnalysisCache, SetsAsideTwiceInOneSecondWithoutOverwriting) {
  TempDir dir;
  const std::string path = dir.file("c.sqlite");
  ScopedCacheEnv env(path);
  write_bytes(path, "first garbage, long enough to be a page of something");
  CacheOpenReport one, two;
  AnalysisCache::open(path, &one);  // and closed again: the fresh cache is replaced below
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  write_bytes(path, "second garbage, long enough to be a page of something");
  AnalysisCache::open(path, &two);
  ASSERT_TRUE(one.set_aside && two.set_aside);
  EXPECT_NE(one.set_aside_path, two.set_aside_path);
  EXPECT_EQ(read_bytes(one.set_aside_path).substr(0, 5), "first");
  EXPECT_EQ(read_bytes(two.set_aside_path).substr(0, 6), "second");
}

TEST(AnalysisCache, MigratesASchema1File) {
  TempDir dir;
  const std::string path = dir.file("v1.sqlite");
  {
    // Schema 1 exactly as released (written out here so that this test notices a changed copy).
    RawDb raw(path);
    raw.exec(R"sql(
PRAGMA journal_mode = WAL;
BEGIN;
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (
  id INTEGER PRIMARY KEY, model_hash TEXT NOT NULL, model_path TEXT NOT NULL,
  data_identity TEXT NOT NULL, data_hash TEXT NOT NULL, layer TEXT NOT NULL, parameters TEXT NOT NULL,
  sample_count INTEGER NOT NULL, chunk_size INTEGER NOT NULL, input_dim INTEGER NOT NULL,
  output_dim INTEGER NOT NULL, expert_dims TEXT NOT NULL, attribute_count INTEGER NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('partial', 'complete')), created TEXT NOT NULL,
  UNIQUE (model_hash, model_path, data_identity, data_hash, layer, parameters));
CREATE INDEX runs_by_source ON runs (model_path, layer, data_identity);
CREATE TABLE chunks (
  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE, chunk_index INTEGER NOT NULL,
  first_sample INTEGER NOT NULL, count INTEGER NOT NULL,
  labels BLOB NOT NULL, predictions BLOB NOT NULL, scores BLOB NOT NULL, inputs BLOB NOT NULL,
  attributes BLOB NOT NULL, coef_offsets BLOB NOT NULL, coef_indices BLOB NOT NULL, coef_values BLOB NOT NULL,
  PRIMARY KEY (run_id, chunk_index));
INSERT INTO meta VALUES ('created', '2024-01-01T00:00:00Z');
INSERT INTO runs VALUES (7, 'h', '/m.safetensors', 'fashion-mnist:test', 'dh', 'head', '{}',
                         2, 2, 0, 1, '[3]', 0, 'complete', '2024-01-01T00:00:00Z');
-- labels [1, 2], predictions [1, 0], scores [1.0, -2.0], offsets [0, 1, 1], indices [2], values [0.5]
INSERT INTO chunks VALUES (7, 0, 0, 2,
  x'01000000000000000200000000000000', x'01000000000000000000000000000000',
  x'000000000000F03F00000000000000C0', x'', x'',
  x'000000000000000001000000000000000100000000000000', x'02000000', x'000000000000E03F');
PRAGMA application_id = 1299533167;
PRAGMA user_version = 1;
COMMIT;
)sql");
  }
  CacheOpenReport report;
  auto cache = AnalysisCache::open(path, &report);
  EXPECT_EQ(report.migrated_from, 1);
  EXPECT_FALSE(report.created);
  EXPECT_FALSE(report.set_aside);
  EXPECT_EQ(cache->run_ids(), std::vector<int64_t>{7});
  EXPECT_TRUE(cache->run_complete(7));
  EXPECT_EQ(cache->run_key(7).model_path, "/m.safetensors");
  EXPECT_EQ(cache->run_info(7).expert_dims, std::vector<int64_t>{3});
  ChunkRecord chunk = cache->get_chunk(7, 0);
  EXPECT_EQ(chunk.labels, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(chunk.predictions, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(chunk.scores, (std::vector<double>{1.0, -2.0}));
  EXPECT_EQ(chunk.coefficients.at(0).offsets, (std::vector<int64_t>{0, 1, 1}));
  EXPECT_EQ(chunk.coefficients.at(0).indices, std::vector<int32_t>{2});
  EXPECT_EQ(chunk.coefficients.at(0).values, std::vector<double>{0.5});
  cache->put_result(7, "stats", "all", "{\"ok\":true}");
  EXPECT_EQ(cache->get_result(7, "stats", "all"), "{\"ok\":true}");
  cache.reset();

  RawDb raw(path);
  EXPECT_EQ(raw.integer("PRAGMA user_version"), kSchemaVersion);
  EXPECT_EQ(raw.integer("PRAGMA page_size"), 4096);  // an existing file keeps its pages (kPageSize: new files)
  EXPECT_EQ(raw.text("SELECT value FROM meta WHERE key = 'created'"), "2024-01-01T00:00:00Z");
  EXPECT_FALSE(raw.text("SELECT value FROM meta WHERE key = 'migrated_from_1'").empty());
  CacheOpenReport again;
  AnalysisCache::open(path, &again);
  EXPECT_EQ(again.migrated_from, 0);
  EXPECT_FALSE(again.set_aside);
}

TEST(AnalysisCache, SurvivesAWriterKilledWithSigkill) {
  TempDir dir;
  const std::string path = dir.file("c.sqlite");
  RunInfo info = make_info();
  info.sample_count = 1'000'000;
  info.chunk_size = 64;
  info.input_dim = 512;  // 128 KiB of inputs per chunk, so a kill often lands inside a write
  int64_t run = 0;
  {
    auto cache = AnalysisCache::open(path);
    run = cache->begin_run(make_key(), info);
  }  // no connection may cross fork()

  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  // Whatever ends this test early, the writer must not outlive it.
  struct Reaper {
    pid_t pid;
    ~Reaper() {
      if (pid <= 0) return;
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  } reaper{child};
  if (child == 0) {
    try {
      auto cache = AnalysisCache::open(path);
      int64_t id = cache->begin_run(make_key(), info);
      for (int64_t i = 0;; i = (i + 1) % info.chunk_count()) cache->put_chunk(id, make_chunk(info, i));
    } catch (...) {
    }
    ::_exit(1);
  }

  int64_t written = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (written < 10 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    int status = 0;
    if (::waitpid(child, &status, WNOHANG) == child) {
      reaper.pid = 0;
      FAIL() << "the writer died by itself";
    }
    if (std::filesystem::exists(path + "-wal")) written = RawDb(path).integer("SELECT count(*) FROM chunks");
  }
  ::kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  reaper.pid = 0;
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  ASSERT_GE(written, 10);

  CacheOpenReport report;
  auto cache = AnalysisCache::open(path, &report);
  EXPECT_FALSE(report.set_aside) << report.set_aside_reason;
  EXPECT_FALSE(report.created);
  EXPECT_EQ(cache->find_run(make_key()), run);
  const std::vector<int64_t> present = cache->chunk_indices(run);
  EXPECT_GE(static_cast<int64_t>(present.size()), written);
  for (int64_t i : present) expect_same(cache->get_chunk(run, i), make_chunk(info, i));
  EXPECT_FALSE(cache->run_complete(run));
  EXPECT_THROW(cache->complete_run(run), UsageError);
}

TEST(AnalysisCache, ReportsADirectoryItCannotCreate) {
  TempDir dir;
  write_bytes(dir.file("plain-file"), "x");
  const std::string path = dir.file("plain-file/sub/analysis.sqlite");
  try {
    AnalysisCache::open(path);
    FAIL() << "no error";
  } catch (const FileError& e) {
    EXPECT_EQ(e.path(), path);
    EXPECT_TRUE(contains(e.what(), "cannot create the cache directory")) << e.what();
  }
  if (::geteuid() != 0) {  // root writes anywhere
    const std::string locked = dir.file("locked");
    std::filesystem::create_directory(locked);
    ::chmod(locked.c_str(), 0500);
    const std::string inside = locked + "/analysis.sqlite";
    EXPECT_TRUE(contains(message_of([&] { AnalysisCache::open(inside); }), "is not writable"));
    ::chmod(locked.c_str(), 0700);
  }
}

TEST(AnalysisCache, DefaultCachePathFollowsTheEnvironment) {
  auto saved = [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  const auto cache_env = saved("MUMOE_CACHE"), xdg = saved("XDG_CACHE_HOME"), home = saved("HOME");
  ::setenv("MUMOE_CACHE", "/somewhere/my.sqlite", 1);
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  ::setenv("HOME", "/home/me", 1);
  EXPECT_EQ(default_cache_path(), "/somewhere/my.sqlite");
  ::unsetenv("MUMOE_CACHE");
  EXPECT_EQ(default_cache_path(), "/xdg/mumoe-studio/analysis.sqlite");
  ::setenv("XDG_CACHE_HOME", "relative", 1);
  EXPECT_EQ(default_cache_path(), "/home/me/.cache/mumoe-studio/analysis.sqlite");
  ::unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(default_cache_path(), "/home/me/.cache/mumoe-studio/analysis.sqlite");
  auto restore = [](const char* name, const std::optional<std::string>& v) {
    if (v) ::setenv(name, v->c_str(), 1);
    else ::unsetenv(name);
  };
  restore("MUMOE_CACHE", cache_env);
  restore("XDG_CACHE_HOME", xdg);
  restore("HOME", home);
}
