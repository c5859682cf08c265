#include "analysis/layer_timing.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <limits>

#include "model/classifier_model.h"
#include "nn/moe_layer.h"
#include "nn/mumoe_block.h"

namespace mumoe::analysis {
namespace {

/// The fastest of three forward passes of `block` (or `router`, when set) over `x`, in seconds.
double best_forward_seconds(nn::MuMoEBlock block, nn::MoELayer router, const torch::Tensor& x) {
  double best = std::numeric_limits<double>::infinity();
  for (int repeat = 0; repeat < 3; ++repeat) {
    const auto start = std::chrono::steady_clock::now();
    const auto out = router.is_empty() ? block->forward(x).output : router->forward(x).output;
    (void)out.sum().item<double>();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

}  // namespace

double stored_inputs_microseconds_per_row(const model::ClassifierModel& m, const RunData& run) {
  const int64_t rows = std::min(run.samples(), m.aligned_batch(2048));
  if (rows == 0) return std::numeric_limits<double>::quiet_NaN();
  const auto inputs =
      torch::from_blob(const_cast<float*>(run.inputs.data()), {rows, run.info.input_dim}, torch::kFloat32).clone();
  torch::NoGradGuard no_grad;
  nn::MuMoEBlock block{nullptr};
  nn::MoELayer router{nullptr};
  if (m.is_router())
    router = nn::copy_moe_layer(m.router_layer(), torch::kFloat32, torch::kCPU);
  else
    block = nn::copy_block(m.layer(), torch::kFloat32, torch::kCPU);
  return best_forward_seconds(block, router, inputs) / static_cast<double>(rows) * 1e6;
}

double random_tokens_microseconds_per_row(const model::ModelLayer& layer, int64_t tokens) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  const int64_t images = 64;
  const auto x = torch::randn({images, tokens, layer.input_dim()});
  nn::MuMoEBlock block{nullptr};
  nn::MoELayer router{nullptr};
  if (layer.is_router()) {
    router = nn::MoELayer(*layer.router);
    router->eval();
  } else {
    block = nn::MuMoEBlock(layer.config);
    block->eval();
  }
  // The layer's shape decides its cost; its weights do not (routing aside).
  return best_forward_seconds(block, router, x) / static_cast<double>(images * tokens) * 1e6;
}

}  // namespace mumoe::analysis
