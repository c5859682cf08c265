// Extraction: stream a data set through a classifier in chunks and store, for its μMoE layer,
// each sample's non-zero coefficients (every expert mode), prediction, output scores, label,
// attributes and the layer's inputs — everything later views need, so they never touch the
// backbone again. A layer without backbone reads the data's features as they are: those inputs
// are not stored but read from the data set when the run is loaded (inputs_left_to_data).
//
// The μMoE layer is evaluated on copies as exact_layer.h says: its gates in the model's dtype (the
// stored coefficients are the model's own, bit for bit), the expert arithmetic in float64 (the
// backbone stays float32). That makes the stored predictions exactly reproducible by the
// counterfactual-ablation methods, which re-evaluate only the layer from the stored inputs.
// Router layers are evaluated wholly in float64.
//
// Whole chunks per transaction (chunked_run.h): a killed job leaves complete chunks behind, and
// the next call computes only the missing ones.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "analysis/progress.h"
#include "analysis/run_data.h"
#include "cache/analysis_cache.h"
#include "data/dataset.h"
#include "io/errors.h"
#include "model/classifier_model.h"

namespace mumoe::analysis {

/// Bumped whenever extraction changes the numbers it stores; part of every run key.
/// 2: μMoE gates in the model's dtype (exact_layer.h) instead of float64.
inline constexpr int kExtractionVersion = 2;

struct ExtractionOptions {
  int64_t chunk_size = 500;  ///< samples per chunk (~0.2 s of CNN time on 2 cores)
  std::string device = "cpu";
  ExtractionArithmetic arithmetic = ExtractionArithmetic::Auto;  ///< progress.h
  /// With the arithmetic on the writer thread: which parts of a chunk that either thread may
  /// compute the writer takes — −1: none, and it leaves the rows' float32 score bounds to the
  /// calling thread; 0: none; 1: the dense modes' checksums; 2: those and the input side.
  /// kBalancedWriterShare (the default): chosen chunk by chunk by how long each thread waits
  /// (extraction.cpp, StageBalance). The stored bits are the same either way; fixed shares are
  /// for tests and benchmarks.
  int writer_share = kBalancedWriterShare;
  static constexpr int kBalancedWriterShare = 100;
  ChunkBatching batching;  ///< when chunks are committed and reported (progress.h)
  /// Store a dense gate's coefficients instead of leaving them to the model. The fallback of
  /// load_extracted_run where this machine's BLAS does not give its own gates' bits again when
  /// they are recomputed (other kernels or thread counts partition the products differently):
  /// the answer then never depends on reproducing them.
  bool store_dense_coefficients = false;
};

/// The content hash of `data`'s samples (images or features, labels, attributes; a streamed
/// folder's listing): the data half of every run key.
std::string data_content_hash(const data::Dataset& data);

/// The cache key of analysing `model_path`'s layer on `data` (hashes the model file and the
/// data's tensors).
cache::RunKey make_run_key(const std::string& model_path, const model::ClassifierModel& model,
                           const data::Dataset& data, const ExtractionOptions& options);

/// The shapes a run of `model` on `data` stores.
cache::RunInfo make_run_info(const model::ClassifierModel& model, const data::Dataset& data,
                             const ExtractionOptions& options);

/// Whether extraction leaves the layer's inputs to the data set rather than storing them: a
/// layer without backbone reads the data's features as they are (ClassifierModel::layer_inputs),
/// which the run key already pins by their hash — a copy in the cache was half of what a bare
/// head's extraction wrote (5 MB per 10,000 rows of 128 features). False where the model has a
/// backbone (its layer's inputs are stored).
namespace test_hooks {
/// Tests only: called on every dense mode's recomputed coefficients before their checksum is
/// compared, to stand in for a BLAS that gives other bits each time (issue 45). Empty: none.
void set_recomputed_gates_hook(std::function<void(torch::Tensor&)> hook);
}  // namespace test_hooks

bool inputs_left_to_data(const model::ClassifierModel& model, const data::Dataset& data);

/// A chunk's coefficients left to the model came out other than those it was extracted with
/// (their checksum differs): the cache was made by other arithmetic — another machine's BLAS
/// kernels, another build. A cache miss, which load_extracted_run mends.
class StaleCoefficients : public FileError {
 public:
  using FileError::FileError;
};

/// What a chunk of `model`'s run `run_id` on `data` leaves out, filled in (run_data.h's
/// ChunkCompletion): the data's features for a chunk that stores no inputs (inputs_left_to_data),
/// and the coefficients of the expert modes it leaves to the model (a dense gate's, extract_run
/// below), recomputed by the model's gates on the CPU and compared with the checksum the
/// extraction stored: StaleCoefficients when they differ; FileError (damage, with the remedy) when
/// the run's shapes and the data's or the model's disagree. Uses `model` and `data` by reference:
/// call it while they live.
ChunkCompletion extracted_chunk_completion(const cache::AnalysisCache& cache, int64_t run_id,
                                           const model::ClassifierModel& model, const data::Dataset& data);

/// load_run_data (run_data.h) with extracted_chunk_completion: how every session loads an image
/// classifier's run. Chunks whose recomputed coefficients are stale (StaleCoefficients) are
/// extracted again on the CPU, without progress (each is one chunk's extraction), and the run is
/// read again; stale twice is an error. So a cache shared by machines with different kernels
/// works on each, re-extracting those chunks when it changes hands.
RunData load_extracted_run(cache::AnalysisCache& cache, int64_t run_id, model::ClassifierModel& model,
                           const data::Dataset& data);

/// Computes every chunk of the run that the cache lacks and marks the run complete. On the CPU, a
/// μMoE mode whose coefficients are all > 0 (a softmax gate) is left to the model
/// (cache::ChunkRecord::left_to_model): only its checksum is stored, and the loader recomputes
/// it (extracted_chunk_completion).
ExtractionSummary extract_run(cache::AnalysisCache& cache, const cache::RunKey& key, model::ClassifierModel& model,
                              const data::Dataset& data, const ExtractionOptions& options,
                              const ExtractionCallback& progress = {});

}  // namespace mumoe::analysis
