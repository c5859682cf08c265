#include "analysis/session_run.h"

#include "io/errors.h"

namespace mumoe::analysis {

void SessionRun::open(const std::string& cache_path, cache::RunKey run_key) {
  key = std::move(run_key);
  cache = cache::AnalysisCache::open(cache_path.empty() ? cache::default_cache_path() : cache_path, &report);
}

std::optional<int64_t> SessionRun::run_id() const { return cache->find_run(key); }

std::optional<int64_t> SessionRun::complete_id() const {
  const auto id = run_id();
  if (id && cache->run_complete(*id)) return id;
  return std::nullopt;
}

bool SessionRun::complete() const { return complete_id().has_value(); }

int64_t SessionRun::complete_run_id(const std::string& what, const std::string& model_path,
                                    const std::string& data_spec, const std::string& hint) const {
  const auto id = complete_id();
  if (!id)
    throw UsageError("no complete " + what + " of " + model_path + " on " + data_spec +
                     " in the cache yet: run the extraction first" + hint);
  return *id;
}

std::optional<ExtractionSummary> SessionRun::already_extracted() const {
  const auto id = complete_id();
  if (!id) return std::nullopt;
  ExtractionSummary s;
  s.run_id = *id;
  s.chunks_reused = cache->run_info(s.run_id).chunk_count();
  return s;
}

cache::CacheCheckReport SessionRun::repair_for_recompute(const cache::ChunkValidator& validate) {
  const auto id = run_id();
  if (!id) return {};
  return cache::repair_run_for_recompute(*cache, *id, validate);
}

}  // namespace mumoe::analysis
