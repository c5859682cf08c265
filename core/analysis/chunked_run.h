// Filling a cached run chunk by chunk, the one resumable loop behind every extraction (image
// heads: extraction.h; GPT blocks: token_extraction.h). Plain C++ (the chunk's computation is the
// caller's).
#pragma once

#include <cstdint>
#include <functional>

#include "analysis/progress.h"
#include "cache/analysis_cache.h"

namespace mumoe::analysis {

/// The result kind under which a shard's run records which shard it is (key "K/N", JSON
/// {"index", "count", "first_chunk", "end_chunk"}).
inline constexpr const char* kShardResultKind = "shard";

/// Begins (or resumes) the run `key` with `info` and stores every chunk the cache lacks:
/// `compute_chunk(c)` makes chunk c's record, which is stored in whole chunks (ChunkBatching), so
/// a cancelled or killed extraction resumes where it stopped. Chunks already stored are skipped
/// (chunks_reused). `progress` is called for every chunk once it is committed, in order, with the
/// samples done (min(sample_count, (c + 1) · chunk_size)) and an ETA from the chunks computed so
/// far; false cancels (Cancelled; the stored chunks stay valid; seen at the next commit, so within
/// about a batch). The run is marked complete at the end.
/// A shard (batching.shard, count > 1) computes only its chunks: progress counts those, the run
/// is marked complete only if every chunk happens to be present, and the run records the shard
/// (result kind kShardResultKind, key "K/N": its chunk range) for `cache merge` to check.
ExtractionSummary fill_chunked_run(cache::AnalysisCache& cache, const cache::RunKey& key, const cache::RunInfo& info,
                                   const std::function<cache::ChunkRecord(int64_t chunk)>& compute_chunk,
                                   const ExtractionCallback& progress, const ChunkBatching& batching = {});

/// The rest of a chunk's work, which makes its record: run on the writer thread, before the
/// record is stored, while the calling thread starts the next chunk.
using FinishChunk = std::function<cache::ChunkRecord()>;

/// fill_chunked_run with each chunk's work in two stages on two threads: `start_chunk(c)` runs on
/// the calling thread and returns what finishes chunk c, which runs on the writer thread, then
/// stores the record, while `start_chunk(c + 1)` runs. For work whose second half needs nothing
/// of the first's thread (a head's float64 expert arithmetic after its gates: extraction.cpp).
/// The same guarantees as fill_chunked_run: one chunk finished and written at a time, reported once
/// committed; an exception from either stage ends the run (a finishing stage's or a write's, e.g.
/// NaN outputs or a record that does not fit the run, is reported after the next chunk's start,
/// and the chunks of its batch before it are committed and reported first; after the calling
/// thread's own error the batch in hand is dropped, unreported); a cancel is seen after a
/// chunk's start, and that chunk is neither finished nor stored. `start_chunk`'s results must not
/// share state with the next start that the two threads would both write.
ExtractionSummary fill_chunked_run_in_two_stages(cache::AnalysisCache& cache, const cache::RunKey& key,
                                                 const cache::RunInfo& info,
                                                 const std::function<FinishChunk(int64_t chunk)>& start_chunk,
                                                 const ExtractionCallback& progress,
                                                 const ChunkBatching& batching = {});

}  // namespace mumoe::analysis
