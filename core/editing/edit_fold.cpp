#include "editing/edit_fold.h"

#include <torch/torch.h>

#include "editing/logit_rewrite.h"
#include "io/errors.h"

namespace mumoe::editing {
namespace {

// The vector each factor contributes to edit `e`'s new component, for factor `k` of a layer
// with `modes` expert modes and input width `in` (bias row last). `final` is false for the
// first layer of a two-layer block, whose new components must contribute nothing.
torch::Tensor component(const LogitEdit& e, size_t k, int64_t modes, int64_t length, bool final,
                        const torch::TensorOptions& options) {
  if (!final) return torch::zeros({length}, options);
  if (k == 0) return torch::tensor(e.mean_coefficients, torch::kFloat64).mul(e.lambda).to(options);
  if (static_cast<int64_t>(k) < modes) return torch::ones({length}, options);
  auto unit = torch::zeros({length}, options);
  unit[static_cast<int64_t>(k) == modes ? length - 1 : e.output] = 1.0;  // input: bias row; output: o
  return unit;
}

// Appends one component per edit to every factor of one layer.
std::vector<torch::Tensor> grow_factors(const std::vector<torch::Tensor>& factors, nn::Factorization f,
                                        int64_t modes, const std::vector<LogitEdit>& edits, bool final) {
  const auto k_edits = static_cast<int64_t>(edits.size());
  std::vector<torch::Tensor> grown;
  for (size_t k = 0; k < factors.size(); ++k) {
    const auto& old = factors[k];
    const auto options = old.options().requires_grad(false);
    if (f == nn::Factorization::CP) {  // [d, R] → [d, R + edits]
      auto t = torch::zeros({old.size(0), old.size(1) + k_edits}, options);
      t.slice(1, 0, old.size(1)).copy_(old);
      for (int64_t j = 0; j < k_edits; ++j)
        t.select(1, old.size(1) + j).copy_(component(edits[j], k, modes, old.size(0), final, options));
      grown.push_back(t);
    } else {  // [Ra, d, Rb] → [Ra + edits, d, Rb + edits], block diagonal
      auto t = torch::zeros({old.size(0) + k_edits, old.size(1), old.size(2) + k_edits}, options);
      t.slice(0, 0, old.size(0)).slice(2, 0, old.size(2)).copy_(old);
      for (int64_t j = 0; j < k_edits; ++j)
        t.select(0, old.size(0) + j).select(1, old.size(2) + j)
            .copy_(component(edits[j], k, modes, old.size(1), final, options));
      grown.push_back(t);
    }
  }
  return grown;
}

}  // namespace

nn::LayerConfig folded_config(const nn::LayerConfig& config, int64_t edits) {
  auto c = config;
  if (c.factorization == nn::Factorization::CP) c.cp_rank += edits;
  else
    for (auto& r : c.tr_ranks) r += edits;
  return c;
}

nn::MuMoEBlock fold_edits(const nn::MuMoEBlock& block, const std::vector<LogitEdit>& edits) {
  const auto& config = block->config();
  if (!config.use_bias)
    throw UsageError("cannot fold a logit edit into a μMoE layer without a bias row (use_bias = false)");
  check_edits(config, edits);
  torch::NoGradGuard no_grad;
  const auto some = block->parameters().front();
  nn::MuMoEBlock folded(folded_config(config, static_cast<int64_t>(edits.size())));
  folded->to(some.device(), some.scalar_type());

  const auto modes = config.hierarchy();
  const auto layer1 = grow_factors(block->first_layer()->factors(), config.factorization, modes, edits,
                                   /*final=*/!config.is_block());
  std::vector<torch::Tensor> layer2;
  if (config.is_block())
    layer2 = grow_factors(block->second_layer()->factors(), config.factorization, modes, edits, /*final=*/true);

  auto old_params = block->named_parameters();
  for (auto& p : folded->named_parameters()) {
    const auto& name = p.key();
    auto prefix_index = [&](const std::string& prefix) -> int64_t {
      return name.rfind(prefix, 0) == 0 ? std::stoll(name.substr(prefix.size())) : -1;
    };
    if (auto k = prefix_index("MuMoE.factors."); k >= 0) p.value().copy_(layer1.at(k));
    else if (auto k2 = prefix_index("MuMoE2.factors."); k2 >= 0) p.value().copy_(layer2.at(k2));
    else p.value().copy_(old_params[name]);
  }
  auto old_buffers = block->named_buffers();
  for (auto& b : folded->named_buffers()) b.value().copy_(old_buffers[b.key()]);
  folded->eval();
  return folded;
}

nn::MoELayer fold_edits(const nn::MoELayer& layer, const std::vector<LogitEdit>& edits) {
  const auto& config = layer->config();
  check_edits(config.experts, config.output_dim, edits);
  torch::NoGradGuard no_grad;
  const auto some = layer->parameters().front();
  auto folded = nn::copy_moe_layer(layer, some.scalar_type(), some.device());
  auto bias = folded->named_parameters()[config.hidden_dim > 0 ? "experts_b2" : "experts_b1"];  // [N, O]
  for (const auto& e : edits) {
    const auto mean = torch::tensor(e.mean_coefficients, torch::kFloat64).to(bias.device(), bias.scalar_type());
    bias.select(1, e.output).add_(mean * e.lambda);
  }
  folded->eval();
  return folded;
}

}  // namespace mumoe::editing
