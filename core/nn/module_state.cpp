#include "nn/module_state.h"

#include <torch/torch.h>

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

}  // namespace mumoe::nn
