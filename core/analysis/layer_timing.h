// The measured cost of one expert layer alone — `compare`'s µs per token (layer_comparison.h):
// the best of three float32 forward passes on the CPU, so that layers of different families are
// timed alike. Torch-free header.
#pragma once

#include <cstdint>

#include "analysis/run_data.h"
#include "model/manifest.h"

namespace mumoe::model {
class ClassifierModel;
}

namespace mumoe::analysis {

/// A head or bare layer on up to 2,048 of its stored inputs (`run`; whole routing groups), in
/// microseconds per sample. NaN for a run of no samples.
double stored_inputs_microseconds_per_row(const model::ClassifierModel& model, const RunData& run);

/// A layer inside a backbone, built from its configuration, on 64 inputs of `tokens` standard-normal
/// tokens each, in microseconds per token: the layer's shape decides its cost, its weights do not
/// (routing aside).
double random_tokens_microseconds_per_row(const model::ModelLayer& layer, int64_t tokens);

}  // namespace mumoe::analysis
