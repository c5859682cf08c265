// Progress reporting of analysis jobs (torch-free, so GUI code can include it).
#pragma once

#include <cstdint>
#include <functional>

namespace mumoe::analysis {

struct ExtractionProgress {
  int64_t samples_done = 0;
  int64_t samples_total = 0;
  int64_t chunks_done = 0;  ///< including chunks found in the cache
  int64_t chunks_total = 0;
  double elapsed_seconds = 0;
  double eta_seconds = 0;
};
/// Called after every chunk; return false to cancel (extract_run then throws Cancelled; the
/// chunks written so far stay valid).
using ExtractionCallback = std::function<bool(const ExtractionProgress&)>;

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
