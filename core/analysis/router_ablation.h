// Exact expert ablation for a sparse or soft MoE layer (nn/moe_layer.h) — what
// counterfactual_ablation.h is for μMoE layers, on the same stored run.
//
// Removing expert i sets its combine weights to zero. The routing (dispatch and combine) is a
// function of the affinities only, never of the experts' outputs, so removing experts changes
// nothing but the output of the samples the experts took (coefficient > 0), and the change is
// their slots' share of that output. Two methods, identical predictions:
//   * Naive (the oracle): the layer's whole forward pass with the experts removed, over every
//     sample, in the run's chunks (whole routing groups, so each sample is routed as it was
//     when extracted).
//   * Sparse: the same pass only over the chunks that hold affected samples (one expert or a
//     set); a sweep takes every expert's removal from one pass per chunk
//     (MoELayer::outputs_without_each_expert) instead of N passes.
// Both evaluate the layer in float64 from the stored float32 inputs, as extraction did.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/ablation_results.h"
#include "analysis/run_data.h"
#include "nn/moe_layer.h"

namespace mumoe::analysis {

class RouterAblation {
 public:
  /// `layer` is copied (float64, on `device`); `run` (its chunks are whole routing groups) must
  /// outlive this object.
  RouterAblation(const nn::MoELayer& layer, const RunData& run, int64_t class_count, const std::string& device = "cpu");

  const ClassAccuracy& before() const { return before_; }

  /// Every sample's prediction with `experts` removed.
  std::vector<int64_t> predictions_after(const std::vector<int64_t>& experts, AblationMethod method);
  AblationOutcome ablate(int64_t mode, const std::vector<int64_t>& experts, AblationMethod method);
  SweepOutcome sweep(int64_t mode, AblationMethod method, const SweepCallback& progress = {});

 private:
  void check(int64_t mode, const std::vector<int64_t>& experts) const;
  int64_t chunk_count() const;
  /// Stored inputs of chunk c, float64 on the device.
  torch::Tensor chunk_inputs(int64_t c) const;
  /// Samples with a coefficient > 0 for one of `experts`.
  std::vector<int64_t> affected_samples(const std::vector<int64_t>& experts) const;

  nn::MoELayer layer_{nullptr};
  const RunData& run_;
  int64_t class_count_;
  torch::Device device_;
  ClassAccuracy before_;
};

}  // namespace mumoe::analysis
