// What a bias correction is about (spec §5), as plain C++ so that the GUI and the torch-free
// bias session façade (bias_session.h) can name it: the target output, the sensitive attribute
// and the subpopulation whose training samples define ā; and the oversampling baseline's options.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "editing/subpopulation.h"

namespace mumoe::editing {

/// What is being corrected: output `target` (a label of the multi-label model), measured over
/// the four subpopulations target × `sensitive`; ā comes from the training samples of
/// `subpopulation` (usually the under-served cell, e.g. long_sleeves=1&frame=1).
struct BiasTask {
  std::string target;
  std::string sensitive;
  Subpopulation subpopulation;
};

/// Completes a task from the command line's pieces: `sensitive` "" = the one attribute of the
/// predicate that is not the target. Throws UsageError when that is ambiguous or missing.
BiasTask make_bias_task(const std::string& target, const std::string& subpopulation, const std::string& sensitive);

/// The task on one cell: `target` = t ∧ `sensitive` = s, e.g. "long_sleeves=1&frame=0".
BiasTask cell_task(const std::string& target, int t, const std::string& sensitive, int s);

/// The training split that goes with a test data SPEC, the front ends' default for where ā comes
/// from: "biased-fmnist:test" → "biased-fmnist:train"; nullopt when the SPEC does not end in
/// ":test" (then the caller must be told, or choose).
std::optional<std::string> training_spec_for(const std::string& test_spec);

struct OversampleOptions {
  int64_t epochs = 5;
  int64_t batch_size = 256;
  double learning_rate = 2e-3;
  uint64_t seed = 0;
  /// How often each sample of the subpopulation is repeated; 0 = enough copies to match the
  /// cell of the same target value with the other sensitive value (capped at 100).
  int64_t factor = 0;
};

}  // namespace mumoe::editing
