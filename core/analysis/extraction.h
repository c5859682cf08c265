// Extraction: stream a data set through a classifier in chunks and store, for its μMoE layer,
// each sample's non-zero coefficients (every expert mode), prediction, output scores, label,
// attributes and the layer's inputs — everything later views need, so they never touch the
// backbone again.
//
// The μMoE layer is evaluated on copies as exact_layer.h says: its gates in the model's dtype (the
// stored coefficients are the model's own, bit for bit), the expert arithmetic in float64 (the
// backbone stays float32). That makes the stored predictions exactly reproducible by the
// counterfactual-ablation methods, which re-evaluate only the layer from the stored inputs.
// Router layers are evaluated wholly in float64.
//
// One transaction per chunk: a killed job leaves complete chunks behind, and the next call
// computes only the missing ones.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "analysis/progress.h"
#include "cache/analysis_cache.h"
#include "data/dataset.h"
#include "model/classifier_model.h"

namespace mumoe::analysis {

/// Bumped whenever extraction changes the numbers it stores; part of every run key.
/// 2: μMoE gates in the model's dtype (exact_layer.h) instead of float64.
inline constexpr int kExtractionVersion = 2;

struct ExtractionOptions {
  int64_t chunk_size = 500;  ///< samples per chunk and transaction (~0.2 s of CNN time on 2 cores)
  std::string device = "cpu";
};

/// The cache key of analysing `model_path`'s layer on `data` (hashes the model file and the
/// data's tensors).
cache::RunKey make_run_key(const std::string& model_path, const model::ClassifierModel& model,
                           const data::Dataset& data, const ExtractionOptions& options);

/// The shapes a run of `model` on `data` stores.
cache::RunInfo make_run_info(const model::ClassifierModel& model, const data::Dataset& data,
                             const ExtractionOptions& options);

/// Computes every chunk of the run that the cache lacks and marks the run complete.
ExtractionSummary extract_run(cache::AnalysisCache& cache, const cache::RunKey& key, model::ClassifierModel& model,
                              const data::Dataset& data, const ExtractionOptions& options,
                              const ExtractionCallback& progress = {});

}  // namespace mumoe::analysis
