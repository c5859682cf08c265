#include "model/state_dict_layout.h"

#include "io/errors.h"

namespace mumoe::model {
namespace {

using ShapeMap = std::map<std::string, std::vector<int64_t>>;

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Reads consecutive "<base>0", "<base>1", … shapes.
std::vector<std::vector<int64_t>> numbered(const ShapeMap& shapes, const std::string& base) {
  std::vector<std::vector<int64_t>> out;
  for (size_t i = 0;; ++i) {
    auto it = shapes.find(base + std::to_string(i));
    if (it == shapes.end()) return out;
    out.push_back(it->second);
  }
}

class LayerInference {
 public:
  LayerInference(const ShapeMap& shapes, const std::string& prefix, const std::string& path)
      : shapes_(shapes), prefix_(prefix), path_(path) {}

  ModelLayer run(const LayoutOverrides& overrides) {
    ModelLayer layer;
    layer.prefix = prefix_;
    layer.name = prefix_.empty() ? "mumoe" : prefix_.substr(0, prefix_.size() - 1);
    auto& c = layer.config;

    const auto projs = numbered(shapes_, prefix_ + "projs.");
    for (size_t e = 0; e < projs.size(); ++e) {
      if (projs[e].size() != 2 || projs[e][0] != projs[0][0])
        fail("gating weight projs." + std::to_string(e) + " has shape " + shape_text(projs[e]) +
             ", expected [I, N]");
      c.expert_dims.push_back(projs[e][1]);
    }
    c.input_dim = projs[0][0];

    if (has("core") || has("MuMoE.core"))
      fail("Tucker μMoE checkpoints are not supported (only CP and TR/TT)");
    std::string base;
    if (has("MuMoE.factors.0")) {
      base = "MuMoE.factors.";
    } else if (has("factors.0")) {
      base = "factors.";
      layer.legacy_factor_keys = true;
    } else {
      fail("has gating weights (projs.0) but no factors (MuMoE.factors.0 or factors.0)");
    }
    const auto factors = numbered(shapes_, prefix_ + base);
    read_factors(c, factors, base, c.input_dim, /*first=*/true);
    if (!layer.legacy_factor_keys && has("MuMoE2.factors.0")) {
      LayerConfig second = c;
      read_factors(second, numbered(shapes_, prefix_ + "MuMoE2.factors."), "MuMoE2.factors.",
                   c.output_dim, /*first=*/false);
      if (second.use_bias != c.use_bias) fail("MuMoE and MuMoE2 disagree on the bias row");
      c.second_dim = second.output_dim;
    }

    if (has("bn.0.running_mean")) {
      c.gate_norm = nn::GateNorm::BatchNorm;
      for (size_t e = 0; e < c.expert_dims.size(); ++e)
        for (const char* buf : {"running_mean", "running_var"}) {
          const auto key = "bn." + std::to_string(e) + "." + buf;
          if (!has(key) || shapes_.at(prefix_ + key) != std::vector<int64_t>{c.expert_dims[e]})
            fail("BatchNorm buffer " + key + " is missing or not of shape [" +
                 std::to_string(c.expert_dims[e]) + "]");
        }
    } else {
      c.gate_norm = overrides.gate_norm_without_bn.value_or(nn::GateNorm::LayerNorm);
    }
    c.input_layer_norm = has("input_ln.weight");
    if (c.input_layer_norm)
      for (const char* key : {"input_ln.weight", "input_ln.bias"})
        if (!has(key) || shapes_.at(prefix_ + key) != std::vector<int64_t>{c.input_dim})
          fail(std::string(key) + " is missing or not of shape [" + std::to_string(c.input_dim) + "]");
    c.gate_activation = overrides.gate_activation.value_or(nn::GateActivationKind::Entmax15);
    try {
      c.validate();
    } catch (const UsageError& e) {
      fail(e.what());
    }
    return layer;
  }

 private:
  using LayerConfig = nn::LayerConfig;

  bool has(const std::string& key) const { return shapes_.count(prefix_ + key) > 0; }

  [[noreturn]] void fail(const std::string& problem) const {
    throw FileError(path_, "μMoE layer '" + (prefix_.empty() ? std::string("(top level)") : prefix_) +
                               "': " + problem);
  }

  // Reads factor shapes into c (CP/TR, ranks, bias, output dim), checking them against the
  // expert dims and the expected input width.
  void read_factors(LayerConfig& c, const std::vector<std::vector<int64_t>>& f,
                    const std::string& base, int64_t in_dim, bool first) {
    const size_t modes = c.expert_dims.size();
    if (f.size() != modes + 2)
      fail(std::to_string(modes) + " expert mode(s) (projs.*) need " + std::to_string(modes + 2) +
           " factors " + base + "*, found " + std::to_string(f.size()));
    const size_t order = f[0].size();
    for (size_t k = 0; k < f.size(); ++k)
      if (f[k].size() != order || (order != 2 && order != 3))
        fail(base + std::to_string(k) + " has shape " + shape_text(f[k]) +
             "; CP factors are 2-D and TR cores 3-D, all of one kind");
    const bool cp = order == 2;
    if (first) c.factorization = cp ? nn::Factorization::CP : nn::Factorization::TR;
    else if ((c.factorization == nn::Factorization::CP) != cp) fail("MuMoE and MuMoE2 differ in factorization");
    const int mode_axis = cp ? 0 : 1;
    for (size_t e = 0; e < modes; ++e)
      if (f[e][mode_axis] != c.expert_dims[e])
        fail(base + std::to_string(e) + " has " + std::to_string(f[e][mode_axis]) +
             " experts but projs." + std::to_string(e) + " has " + std::to_string(c.expert_dims[e]));
    const int64_t rows = f[modes][mode_axis];
    if (rows == in_dim + 1) c.use_bias = true;
    else if (rows == in_dim) c.use_bias = false;
    else
      fail(base + std::to_string(modes) + " has " + std::to_string(rows) + " input rows; expected " +
           std::to_string(in_dim) + " (no bias) or " + std::to_string(in_dim + 1) + " (bias)");
    c.output_dim = f[modes + 1][mode_axis];
    if (cp) {
      for (const auto& s : f)
        if (s[1] != f[0][1]) fail(base + "* disagree on the CP rank");
      c.cp_rank = f[0][1];
    } else {
      c.tr_ranks.clear();
      for (size_t k = 0; k < f.size(); ++k) {
        if (f[k][2] != f[(k + 1) % f.size()][0])
          fail(base + std::to_string(k) + " " + shape_text(f[k]) + " does not chain into the next core");
        c.tr_ranks.push_back(f[k][0]);
      }
    }
  }

  const ShapeMap& shapes_;
  std::string prefix_;
  std::string path_;
};

}  // namespace

std::string strip_wrapper_prefixes(const std::string& key) {
  std::string k = key;
  for (bool changed = true; changed;) {
    changed = false;
    for (const std::string p : {"module.", "_orig_mod."})
      if (k.rfind(p, 0) == 0) {
        k = k.substr(p.size());
        changed = true;
      }
  }
  return k;
}

bool is_nanogpt_layout(const std::vector<std::string>& keys) {
  bool block = false, embedding = false;
  for (const auto& key : keys) {
    block = block || key == "transformer.h.0.ln_1.weight";
    embedding = embedding || key == "transformer.wte.weight" || key == "lm_head.weight";
  }
  return block && embedding;
}

std::vector<ModelLayer> infer_layers(const ShapeMap& shapes, const LayoutOverrides& overrides,
                                     const std::string& path) {
  std::vector<ModelLayer> layers;
  for (const auto& [key, shape] : shapes) {
    if (key != "projs.0" && !ends_with(key, ".projs.0")) continue;
    const std::string prefix = key.substr(0, key.size() - std::string("projs.0").size());
    layers.push_back(LayerInference(shapes, prefix, path).run(overrides));
  }
  if (layers.empty())
    throw FileError(path, "no μMoE layer found: no tensor named 'projs.0' or '….projs.0' "
                          "(is this a μMoE checkpoint?)");
  return layers;
}

std::string file_key(const ModelLayer& layer, const std::string& module_key) {
  const std::string legacy = "MuMoE.";
  if (layer.legacy_factor_keys && module_key.rfind(legacy, 0) == 0)
    return layer.prefix + module_key.substr(legacy.size());
  return layer.prefix + module_key;
}

}  // namespace mumoe::model

namespace mumoe::model {

std::map<std::string, std::vector<int64_t>> expected_shapes(const nn::LayerConfig& c) {
  std::map<std::string, std::vector<int64_t>> out;
  for (size_t e = 0; e < c.expert_dims.size(); ++e) {
    const auto n = c.expert_dims[e];
    out["projs." + std::to_string(e)] = {c.input_dim, n};
    if (c.gate_norm == nn::GateNorm::BatchNorm) {
      out["bn." + std::to_string(e) + ".running_mean"] = {n};
      out["bn." + std::to_string(e) + ".running_var"] = {n};
      out["bn." + std::to_string(e) + ".num_batches_tracked"] = {};
    }
  }
  if (c.input_layer_norm) {
    out["input_ln.weight"] = {c.input_dim};
    out["input_ln.bias"] = {c.input_dim};
  }
  for (int layer = 0; layer < (c.is_block() ? 2 : 1); ++layer) {
    const auto shapes = c.factor_shapes(layer);
    for (size_t k = 0; k < shapes.size(); ++k)
      out[std::string(layer == 0 ? "MuMoE" : "MuMoE2") + ".factors." + std::to_string(k)] = shapes[k];
  }
  return out;
}

}  // namespace mumoe::model
