#include "nn/expert_slices.h"

#include <torch/torch.h>

namespace mumoe::nn {

std::vector<torch::Tensor> expert_slices(const MuMoEBlock& block, const std::vector<int64_t>& experts) {
  const int64_t axis = block->config().factorization == Factorization::CP ? 0 : 1;
  std::vector<torch::Tensor> slices;
  for (const auto& layer : {block->first_layer(), block->second_layer()})
    if (!layer.is_empty())
      for (auto n : experts) slices.push_back(layer->factors().front().select(axis, n));
  return slices;
}

std::vector<torch::Tensor> expert_slices(const MoELayer& layer, const std::vector<int64_t>& experts) {
  const bool two_layer = layer->config().hidden_dim > 0;
  auto params = layer->named_parameters(/*recurse=*/false);
  std::vector<torch::Tensor> slices;
  for (const char* name : two_layer ? std::vector<const char*>{"experts_w2", "experts_b2"}
                                    : std::vector<const char*>{"experts_w1", "experts_b1"})
    for (auto n : experts) slices.push_back(params[name].select(0, n));
  return slices;
}

}  // namespace mumoe::analysis
