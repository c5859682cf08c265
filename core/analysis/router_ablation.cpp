#include "analysis/router_ablation.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>

#include "analysis/counterfactual_ablation.h"
#include "io/errors.h"
#include "nn/device.h"

namespace mumoe::analysis {

RouterAblation::RouterAblation(const nn::MoELayer& layer, const RunData& run, int64_t class_count,
                               const std::string& device)
    : run_(run), class_count_(class_count), device_(nn::parse_device(device)) {
  layer_ = nn::copy_moe_layer(layer, torch::kFloat64, device_);
  if (run.modes() != 1 || run.info.expert_dims[0] != layer->config().experts)
    throw UsageError("the stored run does not belong to this layer (its experts differ)");
  before_ = class_accuracy(run.labels, run.predictions, class_count);
}

void RouterAblation::check(int64_t mode, const std::vector<int64_t>& experts) const {
  if (mode != 0) throw UsageError("a sparse or soft MoE layer has one expert mode (mode 0), not mode " + std::to_string(mode));
  const int64_t n = layer_->config().experts;
  for (const auto e : experts)
    if (e < 0 || e >= n)
      throw UsageError("expert " + std::to_string(e) + " does not exist (the layer has " + std::to_string(n) + ")");
}

int64_t RouterAblation::chunk_count() const {
  return (run_.samples() + run_.info.chunk_size - 1) / run_.info.chunk_size;
}

torch::Tensor RouterAblation::chunk_inputs(int64_t c) const {
  const int64_t begin = c * run_.info.chunk_size, end = std::min(run_.samples(), begin + run_.info.chunk_size);
  const int64_t width = run_.info.input_dim;
  // The stored rows are read, not copied, then converted (to() copies).
  return torch::from_blob(const_cast<float*>(run_.inputs.data()) + begin * width, {end - begin, width}, torch::kFloat32)
      .to(device_, torch::kFloat64);
}

std::vector<int64_t> RouterAblation::affected_samples(const std::vector<int64_t>& experts) const {
  const auto& cols = run_.columns[0];
  std::vector<int64_t> samples;
  for (const auto e : experts)
    samples.insert(samples.end(), cols.samples.begin() + cols.offsets[e], cols.samples.begin() + cols.offsets[e + 1]);
  std::sort(samples.begin(), samples.end());
  samples.erase(std::unique(samples.begin(), samples.end()), samples.end());
  return samples;
}

std::vector<int64_t> RouterAblation::predictions_after(const std::vector<int64_t>& experts, AblationMethod method) {
  check(0, experts);
  torch::NoGradGuard no_grad;
  auto predictions = run_.predictions;
  std::vector<bool> touched(static_cast<size_t>(chunk_count()), method == AblationMethod::Naive);
  for (const auto s : affected_samples(experts)) touched[static_cast<size_t>(s / run_.info.chunk_size)] = true;
  for (int64_t c = 0; c < chunk_count(); ++c) {
    if (!touched[static_cast<size_t>(c)]) continue;
    const auto out = layer_->forward(chunk_inputs(c), experts).output.argmax(1).cpu().contiguous();
    std::copy(out.data_ptr<int64_t>(), out.data_ptr<int64_t>() + out.numel(),
              predictions.begin() + c * run_.info.chunk_size);
  }
  return predictions;
}

AblationOutcome RouterAblation::ablate(int64_t mode, const std::vector<int64_t>& experts, AblationMethod method) {
  check(mode, experts);
  const auto predictions = predictions_after(experts, method);
  return ablation_outcome(run_, before_, class_count_, 0, experts, predictions,
                          static_cast<int64_t>(affected_samples(experts).size()));
}

SweepOutcome RouterAblation::sweep(int64_t mode, AblationMethod method, const SweepCallback& progress) {
  check(mode, {});
  const auto start = std::chrono::steady_clock::now();
  const int64_t n = layer_->config().experts;
  SweepOutcome sweep;
  if (method == AblationMethod::Naive) {
    for (int64_t e = 0; e < n; ++e) {
      sweep.experts.push_back(ablate(0, {e}, AblationMethod::Naive));
      if (progress && !progress(e + 1, n)) throw Cancelled();
    }
  } else {
    // One pass per chunk gives every expert's removal: predictions [S, N] filled chunk by chunk.
    torch::NoGradGuard no_grad;
    std::vector<std::vector<int64_t>> after(static_cast<size_t>(n), run_.predictions);
    for (int64_t c = 0; c < chunk_count(); ++c) {
      const auto without = layer_->outputs_without_each_expert(chunk_inputs(c)).argmax(2).cpu().contiguous();  // [m, N]
      const auto* p = without.data_ptr<int64_t>();
      const int64_t begin = c * run_.info.chunk_size;
      for (int64_t row = 0; row < without.size(0); ++row)
        for (int64_t e = 0; e < n; ++e) after[static_cast<size_t>(e)][static_cast<size_t>(begin + row)] = p[row * n + e];
      if (progress && !progress(c + 1, chunk_count())) throw Cancelled();
    }
    for (int64_t e = 0; e < n; ++e)
      sweep.experts.push_back(ablation_outcome(run_, before_, class_count_, 0, {e}, after[static_cast<size_t>(e)],
                                               run_.columns[0].support(e)));
  }
  sweep.mode = 0;
  sweep.method = method;
  summarise_sweep(sweep);
  sweep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return sweep;
}

}  // namespace mumoe::analysis
