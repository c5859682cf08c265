// The cache side of an analysis session: the cache file, what it did on opening, and the key of
// the session's one extraction run. AnalysisSession (images, features, routers) and
// TextAnalysisSession (GPT tokens) each hold one, so that opening the cache, finding the run,
// telling whether it is complete and repairing it for a recompute are written once; what the
// two sessions extract and compute differs, and stays in them.
//
// Torch-free. Not thread-safe (like the sessions that hold it).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "analysis/progress.h"
#include "cache/analysis_cache.h"
#include "cache/cache_repair.h"

namespace mumoe::analysis {

struct SessionRun {
  cache::CacheOpenReport report;  ///< what the cache file did on opening (cache::opening_note)
  std::unique_ptr<cache::AnalysisCache> cache;
  cache::RunKey key;

  /// Opens `cache_path` ("" = cache::default_cache_path()) for the run `run_key`.
  /// Throws what cache::AnalysisCache::open throws (a FileError naming the file).
  void open(const std::string& cache_path, cache::RunKey run_key);

  std::optional<int64_t> run_id() const;  ///< the run row, partial or complete
  bool complete() const;
  std::optional<int64_t> complete_id() const;  ///< the run's id when it is complete
  /// The complete run's id, or UsageError "no complete `what` of MODEL on DATA in the cache
  /// yet: run the extraction first`hint`".
  int64_t complete_run_id(const std::string& what, const std::string& model_path, const std::string& data_spec,
                          const std::string& hint = "") const;
  /// What extraction reports when the run is already complete (every chunk reused); nullopt
  /// when it still has to run.
  std::optional<ExtractionSummary> already_extracted() const;
  /// Drops the run's stored answers and the chunks `validate` (or the cache's own check) finds
  /// damaged, so that the next extraction recomputes them; nothing when there is no run yet.
  cache::CacheCheckReport repair_for_recompute(const cache::ChunkValidator& validate = {});
};

/// The cache side a session shows its callers, the same for every kind of session: what the
/// cache file did on opening, where it is, and whether the session's run is extracted. A session
/// derives from it and hands it the SessionRun that its private state owns; that state is set
/// once and never replaced, and is destroyed before this base (whose destructor therefore must
/// not read it).
class CachedSession {
 public:
  /// What the cache file did on opening (cache::opening_note says it in words).
  const cache::CacheOpenReport& cache_report() const { return run_->report; }
  const std::string& cache_path() const { return run_->cache->path(); }
  /// True when the cache holds the complete run of this session's model, data and layer.
  bool extracted() const { return run_->complete(); }

 protected:
  explicit CachedSession(const SessionRun& run) : run_(&run) {}
  ~CachedSession() = default;
  CachedSession(const CachedSession&) = delete;
  CachedSession& operator=(const CachedSession&) = delete;

 private:
  const SessionRun* run_;
};

}  // namespace mumoe::analysis
