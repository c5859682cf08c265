// A BiasStudy whose per-sample arrays come from the analysis cache (core/cache): each split is an
// ordinary extraction run — the μMoE layer's inputs, coefficients and outputs, keyed by the
// model file's and the data's content hashes — so the slow part (the CNN over 70,000 images)
// happens once per model and data set, and reopening a bias session is a cache read.
//
// Differences from BiasStudy::create: the layer is evaluated in float64 by the extraction (its
// logits and coefficients are then stored as float32 here), and the first open also fills the
// cache that the analysis views use. Needs SQLite (built in mumoe_edit_store).
#pragma once

#include <string>

#include "data/dataset.h"
#include "editing/bias_study.h"

namespace mumoe::editing {

/// `cache_path` "" = cache::default_cache_path(). Progress counts samples of both splits
/// (cached chunks count as done at once); returning false cancels (throws Cancelled, and what
/// was stored stays valid). An empty `train` gives a metrics-only study.
BiasStudy open_cached_bias_study(const std::string& model_path, data::Dataset train, data::Dataset test,
                                 const std::string& cache_path, const std::string& device = "cpu",
                                 const StudyProgress& progress = {});

}  // namespace mumoe::editing
