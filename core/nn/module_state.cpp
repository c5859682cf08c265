#include "nn/module_state.h"

#include <torch/torch.h>

#include <stdexcept>
#include <string>

namespace mumoe::nn {
namespace {
thread_local bool skip_random_initialisation = false;
}  // namespace

SkipRandomInitialisation::SkipRandomInitialisation() : previous_(skip_random_initialisation) {
  skip_random_initialisation = true;
}
SkipRandomInitialisation::~SkipRandomInitialisation() { skip_random_initialisation = previous_; }
bool SkipRandomInitialisation::active() { return skip_random_initialisation; }

void copy_state_for_eval(const torch::nn::Module& from, torch::nn::Module& to) {
  torch::NoGradGuard no_grad;
  const auto params = from.named_parameters();
  for (auto& p : to.named_parameters()) p.value().copy_(params[p.key()]);
  const auto buffers = from.named_buffers();
  for (auto& b : to.named_buffers()) b.value().copy_(buffers[b.key()]);
  to.eval();
}

void replace_state_for_eval(const torch::nn::Module& from, torch::nn::Module& to, torch::Dtype dtype,
                            const torch::Device& device) {
  torch::NoGradGuard no_grad;
  // set_data swaps the storage behind the registered tensor (what Module::to does), so every
  // handle to it — the module's own members included — sees the copy.
  auto replace = [&](torch::Tensor& target, const torch::Tensor& source, const std::string& name) {
    if (!source.defined() || source.sizes() != target.sizes())
      throw std::runtime_error("cannot copy module state: '" + name + "' is missing or has another shape in the source");
    const auto type = source.is_floating_point() ? dtype : source.scalar_type();
    // copy=true even when dtype and device already match: analyses rely on these copies never
    // sharing storage with the model or with each other (the naive oracle zeroes slices of its
    // float64 copy while the rank-one engine reads ExactLayer's gate-dtype copy).
    target.set_data(source.detach().to(device, type, /*non_blocking=*/false, /*copy=*/true));
  };
  const auto params = from.named_parameters();
  for (auto& p : to.named_parameters()) replace(p.value(), params.contains(p.key()) ? params[p.key()] : torch::Tensor(), p.key());
  const auto buffers = from.named_buffers();
  for (auto& b : to.named_buffers()) replace(b.value(), buffers.contains(b.key()) ? buffers[b.key()] : torch::Tensor(), b.key());
  to.eval();
}

}  // namespace mumoe::nn
