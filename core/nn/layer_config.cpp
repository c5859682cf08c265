#include "nn/layer_config.h"

#include <algorithm>
#include <cctype>

#include "io/errors.h"

namespace mumoe::nn {
namespace {

void require(bool ok, const std::string& message) {
  if (!ok) throw UsageError("invalid μMoE layer configuration: " + message);
}

int64_t product(const std::vector<int64_t>& shape) {
  int64_t p = 1;
  for (auto d : shape) p *= d;
  return p;
}

}  // namespace

std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

int64_t LayerConfig::total_experts() const {
  int64_t total = 1;
  for (auto n : expert_dims) total *= n;
  return total;
}

std::vector<std::vector<int64_t>> LayerConfig::factor_shapes(int layer) const {
  const int64_t in = (layer == 0 ? input_dim : output_dim) + (use_bias ? 1 : 0);
  const int64_t out = layer == 0 ? output_dim : second_dim;
  std::vector<int64_t> dims = expert_dims;
  dims.push_back(in);
  dims.push_back(out);
  std::vector<std::vector<int64_t>> shapes;
  if (factorization == Factorization::CP) {
    for (auto d : dims) shapes.push_back({d, cp_rank});
  } else {
    const size_t k = dims.size();
    for (size_t i = 0; i < k; ++i) shapes.push_back({tr_ranks[i], dims[i], tr_ranks[(i + 1) % k]});
  }
  return shapes;
}

void LayerConfig::validate() const {
  require(input_dim > 0, "input_dim must be positive");
  require(output_dim > 0, "output_dim must be positive");
  require(second_dim >= 0, "second_dim must be ≥ 0");
  require(!expert_dims.empty() && expert_dims.size() <= 4,
          "the hierarchy (number of expert modes) must be 1–4, got " +
              std::to_string(expert_dims.size()));
  for (auto n : expert_dims) require(n > 0, "every expert mode needs at least one expert");
  if (factorization == Factorization::CP) {
    require(cp_rank > 0, "CP rank must be positive");
  } else {
    require(tr_ranks.size() == expert_dims.size() + 2,
            "TR needs hierarchy + 2 ring ranks, got " + std::to_string(tr_ranks.size()));
    for (auto r : tr_ranks) require(r > 0, "TR ranks must be positive");
  }
  require(norm_eps > 0, "norm_eps must be positive");
}

std::string LayerConfig::variant_name() const {
  if (factorization == Factorization::CP) return "CP";
  return (!tr_ranks.empty() && tr_ranks.front() == 1) ? "TT" : "TR";
}

ParameterCount count_parameters(const LayerConfig& config) {
  ParameterCount count;
  for (int layer = 0; layer < (config.is_block() ? 2 : 1); ++layer)
    for (const auto& shape : config.factor_shapes(layer)) count.factors += product(shape);
  for (auto n : config.expert_dims) count.gating += config.input_dim * n;
  if (config.input_layer_norm) count.input_norm = 2 * config.input_dim;
  return count;
}

std::string to_string(Factorization f) { return f == Factorization::CP ? "CP" : "TR"; }

std::string to_string(GateNorm n) {
  switch (n) {
    case GateNorm::BatchNorm: return "batchnorm";
    case GateNorm::LayerNorm: return "layernorm";
    case GateNorm::None: return "none";
  }
  return "?";
}

std::string to_string(GateActivationKind a) {
  return a == GateActivationKind::Entmax15 ? "entmax15" : "softmax";
}

Factorization parse_factorization(const std::string& text) {
  auto t = lowercase(text);
  if (t == "cp") return Factorization::CP;
  if (t == "tr" || t == "tt") return Factorization::TR;
  throw UsageError("unknown factorization '" + text + "' (expected CP, TR or TT)");
}

GateNorm parse_gate_norm(const std::string& text) {
  auto t = lowercase(text);
  if (t == "batchnorm" || t == "bn") return GateNorm::BatchNorm;
  if (t == "layernorm" || t == "ln") return GateNorm::LayerNorm;
  if (t == "none") return GateNorm::None;
  throw UsageError("unknown gate normalisation '" + text + "' (expected batchnorm, layernorm or none)");
}

GateActivationKind parse_gate_activation(const std::string& text) {
  auto t = lowercase(text);
  if (t == "entmax15" || t == "entmax") return GateActivationKind::Entmax15;
  if (t == "softmax") return GateActivationKind::Softmax;
  throw UsageError("unknown gate activation '" + text + "' (expected entmax15 or softmax)");
}

}  // namespace mumoe::nn
