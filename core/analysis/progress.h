// Progress reporting of analysis jobs (torch-free, so GUI code can include it).
#pragma once

#include <cstdint>
#include <functional>

namespace mumoe::analysis {

/// A shard's extraction (ChunkBatching::shard) counts its own chunks and samples only.
struct ExtractionProgress {
  int64_t samples_done = 0;
  int64_t samples_total = 0;
  int64_t chunks_done = 0;  ///< including chunks found in the cache
  int64_t chunks_total = 0;
  double elapsed_seconds = 0;
  /// Seconds left; < 0 while unknown — no chunk computed yet (those so far came from the cache, so
  /// there is no time per chunk to go by; 0 here showed "ETA 0.0 s" at 30 %).
  double eta_seconds = -1;
};
/// Called after every chunk once it is stored (ChunkBatching); return false to cancel (extract_run
/// then throws Cancelled; the chunks written so far stay valid).
using ExtractionCallback = std::function<bool(const ExtractionProgress&)>;

/// When chunks are committed (stored for good) and reported. Quick chunks are committed together
/// (cache::AnalysisCache::ChunkBatch; chunked_run.h): a commit per chunk cost ~100 µs of the
/// writer thread, whose share of a bare head's 500-sample chunk takes about 0.5 ms. Extraction
/// over the bare forward, same build, a commit per chunk → batches (medians of 16 and 8 rounds
/// alternating, this project's 2-core VM, 2026-11-27): softmax N = 128 +12.7 % → +8.3 %,
/// N = 1,024 −0.1 % → −5.9 %. A batch is committed after writing a chunk once it has been open
/// `batch_seconds` (counted from its first chunk's finishing stage), after a chunk whose start took
/// `commit_each_after_seconds` (a backbone's forward pass: its commit is then a small share, and
/// the chunk is reported without waiting for the next), before a chunk the cache holds already,
/// and after the last chunk. A cancel is seen as a batch is reported, within about
/// `batch_seconds`.
struct ChunkBatching {
  double batch_seconds = 0.02;
  double commit_each_after_seconds = 0.005;
  /// Which of the run's chunks this process computes (ChunkShard): all of them by default.
  struct Shard {
    int64_t index = 0;  ///< K in [0, count)
    int64_t count = 1;  ///< N ≥ 1
    bool whole() const { return count == 1; }
    /// Shard K of N holds the contiguous chunks [K·C/N, (K+1)·C/N) of a run of C chunks: a
    /// deterministic split that every task and the merge compute alike, balanced to one chunk,
    /// contiguous so that a task streams one stretch of an image folder or token file.
    int64_t first_chunk(int64_t chunks) const { return index * chunks / count; }
    int64_t end_chunk(int64_t chunks) const { return (index + 1) * chunks / count; }
  } shard;
};
/// A commit per chunk, as before batches: for tests that follow single chunks.
inline constexpr ChunkBatching kCommitEachChunk{0, 0, {}};

/// Where extraction runs a μMoE head's expert arithmetic (extract_run, extraction.h):
/// Auto — on the writer thread, beside the next chunk's gates, for a head without backbone on the
/// CPU of a machine with at most 2 cores (where it was measured), else on the calling thread. The
/// records and the stored bits are the same either way; the other two are for tests and benchmarks.
/// Router layers, and layers on a GPU, always compute on the calling thread (OnWriter is ignored).
enum class ExtractionArithmetic { Auto, OnWriter, OnCaller };

struct ExtractionSummary {
  int64_t run_id = 0;
  int64_t chunks_computed = 0;
  int64_t chunks_reused = 0;
  double seconds = 0;
  /// Extraction (extract_run): whether chunks computed by this call did their float64 expert
  /// arithmetic on the writer thread (ExtractionArithmetic).
  bool arithmetic_on_writer = false;
};

}  // namespace mumoe::analysis
