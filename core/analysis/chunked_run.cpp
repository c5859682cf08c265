#include "analysis/chunked_run.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "io/errors.h"

namespace mumoe::analysis {

ExtractionSummary fill_chunked_run(cache::AnalysisCache& cache, const cache::RunKey& key, const cache::RunInfo& info,
                                   const std::function<cache::ChunkRecord(int64_t chunk)>& compute_chunk,
                                   const ExtractionCallback& progress) {
  const auto start = std::chrono::steady_clock::now();
  const auto seconds_since_start = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  ExtractionSummary summary;
  summary.run_id = cache.begin_run(key, info);
  const auto present = cache.chunk_indices(summary.run_id);
  const std::set<int64_t> done(present.begin(), present.end());
  const int64_t chunks = info.chunk_count();
  summary.chunks_reused = static_cast<int64_t>(done.size());

  ExtractionProgress p;
  p.samples_total = info.sample_count;
  p.chunks_total = chunks;
  for (int64_t c = 0; c < chunks; ++c) {
    if (!done.count(c)) {
      cache.put_chunk(summary.run_id, compute_chunk(c));
      ++summary.chunks_computed;
    }
    p.chunks_done = c + 1;
    p.samples_done = std::min(info.sample_count, (c + 1) * info.chunk_size);
    p.elapsed_seconds = seconds_since_start();
    p.eta_seconds = summary.chunks_computed ? p.elapsed_seconds / summary.chunks_computed * (chunks - c - 1) : 0;
    if (progress && !progress(p)) throw Cancelled();
  }
  cache.complete_run(summary.run_id);
  summary.seconds = seconds_since_start();
  return summary;
}

}  // namespace mumoe::analysis
