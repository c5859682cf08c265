// Checking and repairing the rows of an analysis cache (`mumoe cache check|repair`, and the
// analysis commands' --recompute).
//
// AnalysisCache::open() already refuses or sets aside a file that is not a sound SQLite cache.
// What it cannot see are damaged rows inside a sound file: a chunk whose blobs do not match its
// run, a run marked complete with a chunk missing, a run row whose shapes are unreadable, a
// result that is not JSON. Each of those would fail every later command that reads it. The check
// reads every row (and notices a chunk of a backbone model's run that stores no layer inputs);
// the repair drops exactly the broken ones — a chunk (its run becomes partial,
// so the next extraction recomputes that chunk alone), a result (recomputed when next asked), a
// run whose own row is unreadable (re-extracted when next asked) — and keeps everything sound.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cache/analysis_cache.h"
#include "io/errors.h"

namespace mumoe::cache {

struct CacheProblem {
  int64_t run_id = 0;
  std::string where;    ///< "run", "chunk 7", "result ablation/mode0:3:sparse"
  std::string problem;  ///< what is wrong
  std::string action;   ///< what the repair did ("" when only checking)
};

struct CacheCheckReport {
  int64_t runs = 0, chunks = 0, results = 0;  ///< rows read
  std::vector<CacheProblem> problems;
  bool repaired = false;
  bool sound() const { return problems.empty(); }
};

/// Extra validation of a decoded chunk that only the caller can do (e.g. labels against the
/// model's class count): "" when it is fine, else the problem.
using ChunkValidator = std::function<std::string(const ChunkRecord&)>;

/// Checks one run (its row, every chunk it should have, every result); with `repair`, drops what
/// is broken. Throws UsageError for an unknown run id, FileError for I/O failures.
CacheCheckReport check_run(AnalysisCache& cache, int64_t run_id, bool repair, const ChunkValidator& validate = {});

/// What --recompute does to one run: check_run with repair, then every stored answer of the run
/// is dropped too (when its row survived), so the next questions are answered afresh.
CacheCheckReport repair_run_for_recompute(AnalysisCache& cache, int64_t run_id, const ChunkValidator& validate = {});

/// check_run over every run of the file. `progress(done, total)` after each run; false cancels
/// (Cancelled is thrown; what was repaired so far stays repaired).
CacheCheckReport check_cache(AnalysisCache& cache, bool repair,
                             const std::function<bool(int64_t, int64_t)>& progress = {});

/// The sentence every "damaged cache" error ends with: what to run to repair it.
std::string damaged_cache_remedy(const std::string& cache_path);

/// FileError(cache_path, "PROBLEM; " + damaged_cache_remedy(cache_path)): how loaders report
/// damage they find in a cache.
FileError damaged_cache_error(const std::string& cache_path, const std::string& problem);

}  // namespace mumoe::cache
