// Merging the caches of a sharded extraction (`mumoe analyze --shard K/N`, one cache file per
// task, so that no two tasks ever write one SQLite file — which SQLite's documentation warns
// against on network file systems) into one ordinary cache that every command and the GUI open.
//
// A shard's cache holds one run — the whole run's key and shapes, its own contiguous chunks
// (analysis/progress.h, ChunkBatching::Shard) and a marker result naming the shard "K/N"
// (analysis/chunked_run.h). The merge refuses, naming the files and chunks, and leaves the target
// exactly as it was, when:
//   * a shard file is missing, is not a cache, or holds no shard run (or more than one run);
//   * the shards are of different runs (model content hash, data identity and hash, layer,
//     parameters or shapes differ) or of different splits (N);
//   * a shard K is missing, given twice, or a chunk is held by two files;
//   * together they lack a chunk the target lacks too;
//   * a chunk is damaged (unreadable or not fitting the run);
//   * the target holds the run with other shapes.
// Everything is read and checked before the target is written (an absent target is created only
// then); then the chunks the target lacks are copied in one transaction and the run is marked
// complete. Merging into a cache that holds some chunks already adds only the missing ones.
// The shards and the target are opened as every command opens a cache: one of ours that is
// corrupt or of a newer schema is set aside (renamed) and reported — a shard then refused by name.
// Like `analyze`, writing the run into the target drops that target's runs of an older version of
// the same model file (cache::AnalysisCache::begin_run), also when the copy then fails.
//
// Plain C++ and SQLite (no LibTorch, no Qt).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cache/analysis_cache.h"

namespace mumoe::cache {

/// "K/N" with 0 ≤ K < N (a shard's marker, and `analyze --shard`'s argument) → (K, N); nullopt
/// for anything else.
std::optional<std::pair<int64_t, int64_t>> parse_shard(const std::string& text);

/// The first way two runs differ (model content, data identity or content, layer, options,
/// shapes), in words ("another layer (blocks.1.mlp, not blocks.2.mlp)"), or "" when they are one run.
std::string run_difference(const RunKey& a, const RunKey& b, const RunInfo& x, const RunInfo& y);

/// What every merge checks first: some shards, the target not among them, no file given twice
/// (UsageError for the first two, FileError naming the file for the last).
void check_shard_paths(const std::vector<std::string>& shard_paths, const std::string& target_path);

struct MergeReport {
  RunKey key;                 ///< the run merged
  int64_t run_id = 0;         ///< its id in the target
  int64_t shards = 0;         ///< N
  int64_t chunks = 0;         ///< the run's chunk count
  int64_t chunks_copied = 0;  ///< copied from the shards
  int64_t chunks_kept = 0;    ///< the target had them already
  std::string target_note;    ///< what opening the target did (cache::opening_note), "" when nothing
};

/// Merges `shard_paths` into the cache at `target_path` (created when absent). `progress(chunks
/// done, chunks total)` after every chunk checked and copied; false cancels (Cancelled; the
/// target is left as it was). Throws FileError naming the file (and chunks) for bad shards,
/// UsageError for an impossible request (no shard, the target among the shards).
MergeReport merge_shards(const std::vector<std::string>& shard_paths, const std::string& target_path,
                         const std::function<bool(int64_t, int64_t)>& progress = {});

}  // namespace mumoe::cache
