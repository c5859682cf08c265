// Filling a cached run chunk by chunk, the one resumable loop behind every extraction (image
// heads: extraction.h; GPT blocks: token_extraction.h). Plain C++ (the chunk's computation is the
// caller's).
#pragma once

#include <cstdint>
#include <functional>

#include "analysis/progress.h"
#include "cache/analysis_cache.h"

namespace mumoe::analysis {

/// Begins (or resumes) the run `key` with `info` and stores every chunk the cache lacks:
/// `compute_chunk(c)` makes chunk c's record, which is stored at once, so a cancelled or killed
/// extraction resumes where it stopped. Chunks already stored are skipped (chunks_reused).
/// `progress` is called after every chunk with the samples done (min(sample_count,
/// (c + 1) · chunk_size)) and an ETA from the chunks computed so far; false cancels (Cancelled;
/// the stored chunks stay valid). The run is marked complete at the end.
ExtractionSummary fill_chunked_run(cache::AnalysisCache& cache, const cache::RunKey& key, const cache::RunInfo& info,
                                   const std::function<cache::ChunkRecord(int64_t chunk)>& compute_chunk,
                                   const ExtractionCallback& progress);

}  // namespace mumoe::analysis
