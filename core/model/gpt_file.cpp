#include "model/gpt_file.h"

#include <torch/torch.h>

#include <cmath>
#include <optional>
#include <regex>
#include <set>

#include "io/errors.h"
#include "text/tokenizer_choice.h"

namespace mumoe::model {
namespace {

std::string layer_name(const nn::GptConfig& config, int64_t layer) { return nn::gpt_mlp_layer_name(config, layer); }

// The μMoE GPT's name of layer `layer` (plain state dicts hold μMoE blocks only).
std::string layer_name(int64_t layer) { return layer_name(nn::GptConfig{}, layer); }

bool has_tensor(const std::set<std::string>& names, const std::string& name) { return names.count(name) > 0; }

std::vector<int64_t> tensor_shape(const ModelFile& file, const std::string& name) {
  return file.read_tensor(name).sizes().vec();
}

// Every manifest layer must be the MLP block of one of the GPT's layers, with its configuration.
void check_layers_fit(const ModelFile& file, const nn::GptConfig& config) {
  const auto expected = config.router_mlp ? to_json(*config.router_mlp) : to_json(config.mlp_config());
  std::set<std::string> seen;
  for (const auto& layer : file.manifest().layers) {
    bool known = false;
    for (int64_t i = 0; i < config.n_layer && !known; ++i)
      known = !config.has_dense_mlp(i) && layer.name == layer_name(config, i);
    if (!known || layer.prefix != layer.name + ".")
      throw FileError(file.path(), "layer '" + layer.name + "' is not the MLP block of one of the " +
                                       std::to_string(config.n_layer) + " GPT layers");
    if (layer_config_json(layer) != expected)
      throw FileError(file.path(), "layer '" + layer.name + "' has configuration " + layer_config_json(layer).dump() +
                                       ", which is not the GPT's MLP block " + expected.dump());
    seen.insert(layer.name);
  }
  for (int64_t i = 0; i < config.n_layer; ++i)
    if (!config.has_dense_mlp(i) && !seen.count(layer_name(config, i)))
      throw FileError(file.path(), "the GPT's MLP layer '" + layer_name(config, i) + "' is missing");
}

[[noreturn]] void not_a_gpt(const ModelFile& file, const std::string& problem) {
  throw FileError(file.path(), "not a nanoGPT-μMoE state dict: " + problem);
}

}  // namespace

std::vector<io::NamedTensor> gpt_state_dict(const nn::MuMoEGpt& gpt) {
  std::vector<io::NamedTensor> tensors;
  for (const auto& p : gpt->named_parameters()) tensors.push_back({p.key(), p.value()});
  for (const auto& b : gpt->named_buffers()) tensors.push_back({b.key(), b.value()});
  tensors.push_back({kLmHeadKey, gpt->wte()->weight});
  return tensors;
}

Manifest gpt_manifest(const nn::MuMoEGpt& gpt, nlohmann::json provenance, const std::string& tokenizer) {
  const auto& config = gpt->config();
  Manifest m;
  m.architecture = kGptArchitecture;
  m.architecture_config = {{"gpt", nn::to_json(config)}, {"tokenizer", tokenizer}};
  for (int64_t i = 0; i < config.n_layer; ++i) {
    if (config.has_dense_mlp(i)) continue;  // a plain MLP: no μMoE layer to list
    if (config.router_mlp)
      m.layers.push_back({layer_name(config, i), nn::gpt_mlp_prefix(config, i), {}, false, config.router_mlp});
    else
      m.layers.push_back({layer_name(config, i), nn::gpt_mlp_prefix(config, i), config.mlp_config(), false, std::nullopt});
  }
  m.provenance = std::move(provenance);
  return m;
}

void save_gpt(const std::string& path, const nn::MuMoEGpt& gpt, const Manifest& manifest,
              const io::WriteProgress& progress) {
  save_model_file(path, manifest, gpt_state_dict(gpt), progress);
}

void load_gpt_weights(const ModelFile& file, nn::MuMoEGpt& gpt) {
  const auto names_list = file.tensor_names();
  const std::set<std::string> names(names_list.begin(), names_list.end());

  // Tensors the model does not have are an error (a different architecture or configuration),
  // except nanoGPT's causal-mask buffers, which carry no learned values.
  std::set<std::string> known;
  for (const auto& t : gpt_state_dict(gpt)) known.insert(t.name);
  static const std::regex mask_buffer(R"(transformer\.h\.\d+\.attn\.bias)");
  for (const auto& name : names)
    if (!known.count(name) && !std::regex_match(name, mask_buffer))
      throw FileError(file.path(), "tensor '" + name + "' is not part of a GPT of this configuration with " +
                                       std::to_string(gpt->n_layer()) + " layers");

  // Weight tying: PyTorch's state dict lists the shared tensor under both names; a file written
  // with safetensors' save_model keeps only one of them.
  const bool has_wte = has_tensor(names, kTokenEmbeddingKey), has_head = has_tensor(names, kLmHeadKey);
  if (has_wte && has_head &&
      !torch::equal(file.read_tensor(kTokenEmbeddingKey), file.read_tensor(kLmHeadKey)))
    throw FileError(file.path(), std::string(kLmHeadKey) + " differs from " + kTokenEmbeddingKey +
                                     "; this GPT ties them (weight tying), so they must be equal");
  const std::string embedding_source = has_wte || !has_head ? kTokenEmbeddingKey : kLmHeadKey;
  file.load_into(*gpt, [&](const std::string& key) {
    return key == kTokenEmbeddingKey ? embedding_source : key;
  });
}

nn::MuMoEGpt load_gpt(const ModelFile& file, int64_t n_head) {
  if (file.inferred()) return load_gpt_state_dict(file, n_head);
  const auto& m = file.manifest();
  if (m.architecture != kGptArchitecture)
    throw FileError(file.path(), "is a '" + m.architecture + "' model, not a GPT");
  if (!m.architecture_config.contains("gpt"))
    throw FileError(file.path(), "manifest: architecture_config lacks 'gpt'");
  // A router GPT's MLP configuration is its layers' (all equal: check_layers_fit).
  std::optional<nn::MoELayerConfig> router_mlp;
  if (!m.layers.empty() && m.layers.front().is_router()) router_mlp = m.layers.front().router;
  nn::GptConfig config;
  try {
    config = nn::gpt_config_from_json(m.architecture_config.at("gpt"), router_mlp);
  } catch (const UsageError& e) {
    throw FileError(file.path(), std::string("manifest: ") + e.what());
  }
  check_layers_fit(file, config);
  nn::MuMoEGpt gpt(config);
  load_gpt_weights(file, gpt);
  gpt->eval();
  return gpt;
}

int64_t default_head_count(int64_t n_embd) {
  if (n_embd <= 0) throw UsageError("n_embd must be positive");
  auto heads = std::max<int64_t>(1, std::llround(static_cast<double>(n_embd) / 64.0));
  while (n_embd % heads != 0) --heads;
  return heads;
}

nn::GptConfig infer_gpt_config(const ModelFile& file, int64_t n_head) {
  const auto names_list = file.tensor_names();
  const std::set<std::string> names(names_list.begin(), names_list.end());
  auto fail = [&file](const std::string& problem) { not_a_gpt(file, problem); };

  const std::string embedding = has_tensor(names, kTokenEmbeddingKey) ? kTokenEmbeddingKey : kLmHeadKey;
  if (!has_tensor(names, embedding)) fail("it has neither transformer.wte.weight nor lm_head.weight");
  const auto wte = tensor_shape(file, embedding);
  if (wte.size() != 2) fail(embedding + " is not a matrix [vocab_size, n_embd]");
  if (!has_tensor(names, "transformer.wpe.weight")) fail("transformer.wpe.weight is missing");
  const auto wpe = tensor_shape(file, "transformer.wpe.weight");
  if (wpe.size() != 2 || wpe[1] != wte[1])
    fail("transformer.wpe.weight has shape " + c10::str(c10::IntArrayRef(wpe)) + ", expected [block_size, " +
         std::to_string(wte[1]) + "]");

  nn::GptConfig c;
  c.vocab_size = wte[0];
  c.n_embd = wte[1];
  c.block_size = wpe[0];
  c.n_layer = 0;
  while (has_tensor(names, "transformer.h." + std::to_string(c.n_layer) + ".ln_1.weight")) ++c.n_layer;
  if (c.n_layer == 0) fail("it has no transformer.h.0.ln_1.weight");
  if (n_head < 0) throw UsageError("n_head must be positive (or 0 for the default)");
  // The head count: as given, else what the checkpoint's own model_args say (nanoGPT's ckpt.pt),
  // else GPT-2's head width of 64. The other model_args must agree with the weights.
  const auto args = nanogpt_model_args(file);
  auto arg = [&](const char* key) -> std::optional<int64_t> {
    if (!args.contains(key)) return std::nullopt;
    if (!args.at(key).is_number_integer() || args.at(key).get<int64_t>() <= 0)
      fail(std::string("model_args.") + key + " is " + args.at(key).dump() + ", not a positive integer");
    return args.at(key).get<int64_t>();
  };
  for (const auto& [key, value] : {std::pair<const char*, int64_t>{"n_layer", c.n_layer}, {"n_embd", c.n_embd},
                                   {"block_size", c.block_size}, {"vocab_size", c.vocab_size}})
    if (const auto said = arg(key); said && *said != value)
      fail(std::string("its model_args say ") + key + " = " + std::to_string(*said) + ", but the weights have " +
           std::to_string(value));
  const auto args_heads = arg("n_head");
  // nanoGPT's bias=False (its train.py default): no biases in the LayerNorms and attention Linears.
  c.bias = has_tensor(names, "transformer.h.0.ln_1.bias");
  if (args.contains("bias") && args.at("bias").is_boolean() && args.at("bias").get<bool>() != c.bias)
    fail(std::string("its model_args say bias = ") + (c.bias ? "False" : "True") + ", but the weights " +
         (c.bias ? "have" : "lack") + " transformer.h.0.ln_1.bias");
  c.n_head = n_head > 0 ? n_head : args_heads ? *args_heads : default_head_count(c.n_embd);
  if (c.n_embd % c.n_head != 0)
    throw UsageError("n_head " + std::to_string(c.n_head) + " does not divide n_embd " + std::to_string(c.n_embd) +
                     " of " + file.path());

  // Each block's MLP is a μMoE block (found by ModelFile by its gating weights) or nanoGPT's
  // plain MLP (mlp.c_fc.1.weight); the μMoE blocks' sizes come from the first of them.
  const ModelLayer* first = nullptr;
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const ModelLayer* found = nullptr;
    for (const auto& layer : file.manifest().layers)
      if (layer.name == layer_name(i)) found = &layer;
    if (found) {
      if (!first) first = found;
    } else if (has_tensor(names, "transformer.h." + std::to_string(i) + ".mlp.c_fc.1.weight")) {
      c.dense_mlp_layers.push_back(i);
    } else {
      fail("block " + std::to_string(i) + "'s MLP is neither a μMoE block (" + layer_name(i) +
           ".projs.0) nor a plain MLP (transformer.h." + std::to_string(i) + ".mlp.c_fc.1.weight)");
    }
  }
  // No μMoE block at all: nanoGPT's GPT-2 itself, which opens with nothing to analyse (the μMoE
  // settings keep their defaults and build nothing).
  if (first) {
    const auto& mlp = first->config;
    if (mlp.hierarchy() != 1)
      fail(first->name + " has " + std::to_string(mlp.hierarchy()) + " expert modes; the GPT supports one");
    c.experts = mlp.expert_dims.front();
    c.factorization = mlp.factorization;
    c.cp_rank = mlp.cp_rank;
    c.tr_ranks = mlp.tr_ranks;
    c.gate_activation = mlp.gate_activation;
  }
  try {
    c.validate();
  } catch (const UsageError& e) {
    throw FileError(file.path(), e.what());
  }
  check_layers_fit(file, c);
  return c;
}

nlohmann::json nanogpt_model_args(const ModelFile& file) {
  const auto side = file.side_values();
  if (side.is_object() && side.contains("model_args") && side.at("model_args").is_object()) return side.at("model_args");
  return nlohmann::json::object();
}

HeadCountSource gpt_head_count_source(const ModelFile& file, int64_t n_head) {
  if (!file.inferred()) return HeadCountSource::Manifest;
  if (n_head > 0) return HeadCountSource::Given;
  if (nanogpt_model_args(file).contains("n_head")) return HeadCountSource::ModelArgs;
  return HeadCountSource::Guessed;
}

std::string gpt_tokenizer_name(const ModelFile& file, int64_t vocab_size, const std::string& choice) {
  if (!choice.empty()) return choice;
  const auto& config = file.manifest().architecture_config;
  if (!file.inferred() && config.is_object() && config.contains("tokenizer") && config.at("tokenizer").is_string())
    return config.at("tokenizer").get<std::string>();
  const auto by_vocabulary = text::tokenizer_for_vocabulary(vocab_size);
  if (by_vocabulary.empty())
    throw UsageError(file.path() + ": a GPT with a vocabulary of " + std::to_string(vocab_size) +
                     " tokens names no tokenizer; choose one with --tokenizer byte|gpt2|DIR");
  return by_vocabulary;
}

std::shared_ptr<const text::Tokenizer> open_gpt_tokenizer(const ModelFile& file, int64_t vocab_size,
                                                          const std::string& choice) {
  auto tokenizer = text::make_tokenizer(gpt_tokenizer_name(file, vocab_size, choice));
  if (tokenizer->vocab_size() > vocab_size)
    throw UsageError("the tokenizer " + tokenizer->name() + " has " + std::to_string(tokenizer->vocab_size()) +
                     " tokens, more than the " + std::to_string(vocab_size) + " rows of " + file.path() +
                     "'s embedding: it is not the model's tokenizer");
  return tokenizer;
}

nn::MuMoEGpt load_gpt_state_dict(const ModelFile& file, int64_t n_head) {
  nn::MuMoEGpt gpt(infer_gpt_config(file, n_head));
  load_gpt_weights(file, gpt);
  gpt->eval();
  return gpt;
}

}  // namespace mumoe::model
