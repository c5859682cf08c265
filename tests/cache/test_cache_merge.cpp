// Merging the caches of a sharded extraction (cache/cache_merge.h): shards that together hold a
// run merge into the same chunks as the whole run; a missing, repeated, foreign, unfinished or
// damaged shard is refused by name and leaves the target as it was; a target that holds some
// chunks gets only the missing ones.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cache/analysis_cache.h"
#include "cache/cache_merge.h"
#include "cache_records.h"
#include "io/errors.h"
#include "temp_dir.h"

namespace cache_merge_test {

using namespace mumoe;
using namespace mumoe::cache;
using testkit::expect_same;
using testkit::make_chunk;
using testkit::make_key;
using testkit::TempDir;

// 22 samples in chunks of 4: 6 chunks, the last one short. Shard K of 3 holds chunks 2K, 2K+1.
RunInfo six_chunks() {
  auto info = testkit::make_info();
  info.sample_count = 22;
  return info;
}

// The cache a task of `analyze --shard K/N` leaves: the run, the chunks given, the marker.
std::string write_shard(const TempDir& dir, int64_t k, int64_t n, const std::vector<int64_t>& chunks,
                        const RunKey& key = make_key(), const RunInfo& info = six_chunks()) {
  const auto path = dir.file("shard-" + std::to_string(k) + "-of-" + std::to_string(n) + "-" + key.model_hash +
                             std::to_string(info.sample_count) + ".sqlite");
  auto cache = AnalysisCache::open(path);
  const auto run = cache->begin_run(key, info);
  for (const auto c : chunks) cache->put_chunk(run, make_chunk(info, c));
  cache->put_result(run, "shard", std::to_string(k) + "/" + std::to_string(n), "{}");
  return path;
}

std::vector<std::string> three_shards(const TempDir& dir) {
  return {write_shard(dir, 0, 3, {0, 1}), write_shard(dir, 1, 3, {2, 3}), write_shard(dir, 2, 3, {4, 5})};
}

// What a target holds: (run key's model hash, complete, chunk indices) per run.
std::string contents(const std::string& path) {
  auto cache = AnalysisCache::open(path);
  std::string out;
  for (const auto run : cache->run_ids()) {
    out += cache->run_key(run).model_hash + (cache->run_complete(run) ? " complete:" : " partial:");
    for (const auto c : cache->chunk_indices(run)) out += " " + std::to_string(c);
    out += ";";
  }
  return out;
}

// merge_shards must throw FileError naming `file` and saying `phrase`, leaving `target` as it was.
void expect_refused(const std::vector<std::string>& shards, const std::string& target, const std::string& file,
                    const std::string& phrase) {
  const auto before = contents(target);
  try {
    merge_shards(shards, target);
    ADD_FAILURE() << "merged, but should refuse: " << phrase;
  } catch (const FileError& e) {
    EXPECT_EQ(e.path(), file) << e.what();
    EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
  }
  EXPECT_EQ(contents(target), before);
}

TEST(CacheMerge, ShardsMergeIntoTheWholeRun) {
  TempDir dir;
  const auto target = dir.file("merged.sqlite");
  const auto report = merge_shards(three_shards(dir), target);
  EXPECT_EQ(report.shards, 3);
  EXPECT_EQ(report.chunks, 6);
  EXPECT_EQ(report.chunks_copied, 6);
  auto cache = AnalysisCache::open(target);
  const auto run = cache->find_run(make_key());
  ASSERT_TRUE(run);
  EXPECT_TRUE(cache->run_complete(*run));
  for (int64_t c = 0; c < 6; ++c) expect_same(cache->get_chunk(*run, c), make_chunk(six_chunks(), c));
  // Again: nothing left to copy.
  const auto again = merge_shards(three_shards(dir), target);
  EXPECT_EQ(again.chunks_copied, 0);
  EXPECT_EQ(again.chunks_kept, 6);
}

TEST(CacheMerge, ATargetWithSomeChunksGetsOnlyTheMissingOnes) {
  TempDir dir;
  const auto target = dir.file("merged.sqlite");
  {
    auto cache = AnalysisCache::open(target);
    const auto run = cache->begin_run(make_key(), six_chunks());
    for (const int64_t c : {2, 3}) cache->put_chunk(run, make_chunk(six_chunks(), c, /*seed=*/0));
  }
  // Shard 1 is not needed: the target holds its chunks.
  const auto report = merge_shards({write_shard(dir, 0, 3, {0, 1}), write_shard(dir, 2, 3, {4, 5})}, target);
  EXPECT_EQ(report.chunks_copied, 4);
  EXPECT_EQ(report.chunks_kept, 2);
  EXPECT_EQ(contents(target), "m1 complete: 0 1 2 3 4 5;");
}

TEST(CacheMerge, RefusesMissingRepeatedUnfinishedAndForeignShardsLeavingTheTarget) {
  TempDir dir;
  const auto shards = three_shards(dir);
  const auto target = dir.file("merged.sqlite");
  { AnalysisCache::open(target)->begin_run(make_key("other"), six_chunks()); }  // something to keep
  expect_refused({shards[0], shards[2]}, target, target, "shard 1/3 (chunks 2–3) is not among the 2 files given");
  expect_refused({shards[0], shards[1], shards[2], shards[1]}, target, shards[1], "is given twice");
  // An unfinished task: shard 1 lacks chunk 3.
  TempDir other;
  const auto unfinished = write_shard(other, 1, 3, {2});
  expect_refused({shards[0], unfinished, shards[2]}, target, unfinished, "lacks chunk 3 of shard 1/3");
  // Two files claiming shard 1.
  TempDir third;
  const auto twin = write_shard(third, 1, 3, {2, 3});
  expect_refused({shards[0], shards[1], twin, shards[2]}, target, twin, "as is " + shards[1]);
  // A shard of another model, of other shapes, of another split; a chunk outside its shard.
  const auto foreign = write_shard(other, 2, 3, {4, 5}, make_key("m2"));
  expect_refused({shards[0], shards[1], foreign}, target, foreign, "another model");
  auto bigger = six_chunks();
  bigger.sample_count = 21;
  const auto reshaped = write_shard(other, 2, 3, {4, 5}, make_key(), bigger);
  expect_refused({shards[0], shards[1], reshaped}, target, reshaped, "other shapes");
  const auto split4 = write_shard(other, 3, 4, {5});
  expect_refused({shards[0], shards[1], split4}, target, split4, "split into 3");
  const auto overreaching = write_shard(other, 5, 7, {0, 4});
  expect_refused({overreaching}, target, overreaching, "holds chunk 0, which is shard 1's");  // 7 shards of 6 chunks: shard 0 is empty
}

TEST(CacheMerge, RefusesAWholeRunsCacheAndADamagedChunk) {
  TempDir dir;
  auto shards = three_shards(dir);
  const auto target = dir.file("merged.sqlite");
  // A cache made without --shard: no marker.
  const auto whole = dir.file("whole.sqlite");
  {
    auto cache = AnalysisCache::open(whole);
    const auto run = cache->begin_run(make_key(), six_chunks());
    for (int64_t c = 0; c < 6; ++c) cache->put_chunk(run, make_chunk(six_chunks(), c));
  }
  expect_refused({whole}, target, whole, "not a shard's");
  // A chunk whose blob was cut short (a disk error): refused before the target is written.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(shards[2].c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE chunks SET labels = x'0102' WHERE chunk_index = 5", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  expect_refused(shards, target, shards[2], "chunk 5 is damaged");
  // Not a file at all.
  expect_refused({shards[0], dir.file("absent.sqlite")}, target, dir.file("absent.sqlite"), "does not exist");
  // A refused merge into a new file leaves no file behind.
  const auto fresh = dir.file("fresh.sqlite");
  EXPECT_THROW(merge_shards({shards[0], shards[1]}, fresh), FileError);
  EXPECT_FALSE(std::filesystem::exists(fresh));
  EXPECT_THROW(merge_shards({shards[0]}, shards[0]), UsageError);
  EXPECT_THROW(merge_shards({}, target), UsageError);
}

}  // namespace cache_merge_test
