#include "language_model.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cli_support.h"
#include "io/errors.h"
#include "model/gpt_file.h"
#include "nn/backbone_config.h"
#include "text/token_file.h"
#include "text/tokenizer_choice.h"
#include "text/text_corpus.h"
#include "train/lm_training.h"

namespace mumoe::cli {
namespace {

std::vector<int32_t> tokens_of(const std::vector<std::string>& documents, const text::Tokenizer& tokenizer) {
  std::vector<int32_t> out;
  for (const auto& d : documents) {
    const auto ids = tokenizer.encode(d + "\n");
    out.insert(out.end(), ids.begin(), ids.end());
  }
  return out;
}

// The GPT of a model file with its tokenizer; generation draws only the tokenizer's ids.
struct OpenedGpt {
  nn::MuMoEGpt gpt{nullptr};
  std::shared_ptr<const text::Tokenizer> tokenizer;
  model::ModelFile file;
};

OpenedGpt open_gpt(const std::string& path, const GptOpenOptions& o) {
  auto file = model::ModelFile::load(path);
  auto gpt = model::load_gpt(file, o.heads);
  auto tokenizer = model::open_gpt_tokenizer(file, gpt->config().vocab_size, o.tokenizer);
  gpt->set_sampled_vocabulary(tokenizer->vocab_size());
  return {gpt, tokenizer, std::move(file)};
}

}  // namespace

bool is_text_spec(const std::string& spec) {
  return spec == "fortunes" || spec.rfind("fortunes:", 0) == 0 || spec.rfind("text:", 0) == 0 ||
         text::is_token_spec(spec);
}

TextTokens load_text_tokens(const std::string& spec, double validation_fraction, uint64_t seed,
                            const text::Tokenizer& tokenizer) {
  const auto corpus = text::load_text_spec(spec);
  const auto split = text::split_documents(corpus, validation_fraction, seed);
  TextTokens t;
  t.train = tokens_of(split.train.documents, tokenizer);
  t.validation = tokens_of(split.validation.documents, tokenizer);
  t.train_documents = static_cast<int64_t>(split.train.documents.size());
  t.validation_documents = static_cast<int64_t>(split.validation.documents.size());
  return t;
}

int run_train_language_model(const LanguageModelRequest& r) {
  const auto tokenizer = text::make_tokenizer(r.tokenizer);
  const auto tokens = load_text_tokens(r.data, r.validation_fraction, r.seed, *tokenizer);
  nn::GptConfig config;
  config.vocab_size = tokenizer->vocab_size();
  config.block_size = r.block_size;
  config.n_layer = r.layers;
  config.n_head = r.heads;
  config.n_embd = r.embd;
  config.experts = r.experts;
  config.cp_rank = r.rank;
  if (!r.mlp_router.empty()) {
    if (r.mlp_hidden < 0) throw UsageError("--mlp-hidden must be positive (or 0: parameter-matched)");
    const auto hidden =
        r.mlp_hidden > 0 ? r.mlp_hidden : nn::parameter_matched_expert_hidden(r.embd, 4 * r.embd, r.experts);
    config.router_mlp = nn::gpt_router_mlp_config(nn::parse_router_kind(r.mlp_router), r.embd, r.block_size,
                                                  r.experts, hidden, r.capacity_factor);
  }
  config.validate();
  torch::manual_seed(r.seed);
  nn::MuMoEGpt gpt(config);

  train::LmTrainOptions o;
  o.steps = r.steps;
  o.batch_size = r.batch_size;
  o.learning_rate = r.learning_rate;
  o.min_learning_rate = r.learning_rate / 10;
  o.warmup_steps = r.warmup;
  o.weight_decay = r.weight_decay;
  o.aux_loss_weight = r.aux_loss_weight;
  o.seed = r.seed;
  o.device = r.device;
  o.checkpoint_path = r.output;
  o.checkpoint_every = r.checkpoint_every;
  o.resume = r.resume;
  nlohmann::json provenance = {{"command", r.command_line},      {"data", r.data},
                               {"tokenizer", tokenizer->name()},            {"train_tokens", tokens.train.size()},
                               {"validation_tokens", tokens.validation.size()},
                               {"validation_fraction", r.validation_fraction},
                               {"steps", r.steps},               {"batch_size", r.batch_size},
                               {"learning_rate", r.learning_rate}, {"seed", r.seed},
                               {"libtorch", TORCH_VERSION}};
  if (config.router_mlp) provenance["aux_loss_weight"] = r.aux_loss_weight;
  auto write = [&](const std::string& path, int64_t done) {
    auto p = provenance;
    p["completed_steps"] = done;
    model::save_gpt(path, gpt, model::gpt_manifest(gpt, p));
  };
  auto read = [&](const std::string& path) -> int64_t {
    const auto file = model::ModelFile::load(path);
    model::load_gpt_weights(file, gpt);
    return file.manifest().provenance.value("completed_steps", int64_t{0});
  };
  auto progress = [&](const train::LmTrainProgress& p) {
    if (!r.quiet && (p.step % 25 == 0 || p.step == p.steps))
      std::fprintf(stderr, "step %lld/%lld  loss %.3f  lr %.2e  %.0f tokens/s  ETA %.0f s\n",
                   static_cast<long long>(p.step), static_cast<long long>(p.steps), p.smoothed_loss, p.learning_rate,
                   p.tokens_per_second, p.eta_seconds);
    return true;
  };
  const auto result = train::train_lm(gpt, tokens.train, o, progress, write, read);
  const auto eval = train::evaluate_lm(gpt, tokens.validation, 0, 32, r.device);
  provenance["completed_steps"] = r.steps;
  provenance["train_seconds_this_run"] = result.seconds;
  provenance["validation_metrics"] = {{"tokens", eval.tokens},
                                      {"mean_loss", eval.mean_loss},
                                      {"perplexity", eval.perplexity},
                                      {"accuracy", eval.accuracy}};
  gpt->to(torch::kCPU);
  model::save_gpt(r.output, gpt, model::gpt_manifest(gpt, provenance, tokenizer->name()));
  std::error_code ec;
  std::filesystem::remove(r.output + ".optim.pt", ec);
  if (r.json)
    std::cout << json_text(nlohmann::json({{"output", r.output}, {"seconds", result.seconds},
                                 {"validation", provenance["validation_metrics"]}}))
              << "\n";
  else
    std::printf("wrote %s after %.0f s; validation loss %.3f nats/token, perplexity %.2f, next-token accuracy %.3f\n",
                r.output.c_str(), result.seconds, eval.mean_loss, eval.perplexity, eval.accuracy);
  return kSuccess;
}

int run_evaluate_language_model(const std::string& model_path, const std::string& data, double validation_fraction,
                                const std::string& device, bool json, const GptOpenOptions& open) {
  auto [gpt, tokenizer, file] = open_gpt(model_path, open);
  const auto seed = file.manifest().provenance.value("seed", uint64_t{0});
  TextTokens tokens;
  if (text::is_token_spec(data))  // already tokens: the stream's first max_tokens, all of them evaluated
    tokens.validation = text::read_token_spec(data, open.max_tokens, tokenizer->vocab_size()).tokens;
  else
    tokens = load_text_tokens(data, validation_fraction, seed, *tokenizer);
  const auto e = train::evaluate_lm(gpt, tokens.validation, 0, 32, device);
  if (json)
    std::cout << json_text(nlohmann::json({{"model", model_path}, {"data", data},
                                 {"split", text::is_token_spec(data) ? "stream" : "validation"},
                                 {"tokens", e.tokens}, {"mean_loss", e.mean_loss}, {"perplexity", e.perplexity},
                                 {"accuracy", e.accuracy}}))
              << "\n";
  else
    std::printf("%s on %s (validation, %lld tokens): loss %.4f nats/token, perplexity %.3f, next-token accuracy %.4f\n",
                model_path.c_str(), data.c_str(), static_cast<long long>(e.tokens), e.mean_loss, e.perplexity,
                e.accuracy);
  return kSuccess;
}

namespace {

struct GenerateOptions {
  GptOpenOptions open;
  std::string model, prompt;
  int64_t tokens = 200, top_k = 40;
  double temperature = 0.8;
  uint64_t seed = 0;
  bool json = false;

  /// Declares these options on the command `app`.
  void add_to(CLI::App* app) {
    app->add_option("MODEL", model, "GPT model file")->required();
    app->add_option("--prompt", prompt, "Text to continue");
    app->add_option("--tokens", tokens, "Tokens to generate (default 200)");
    app->add_option("--temperature", temperature, "Sampling temperature (default 0.8; 0 = greedy)");
    app->add_option("--top-k", top_k, "Sample among the k most likely tokens (default 40; 0 = all)");
    app->add_option("--heads", open.heads,
                    "Attention heads of a plain nanoGPT state dict (default: its model_args, else width / 64)");
    app->add_option("--tokenizer", open.tokenizer,
                    "byte, gpt2 or a directory with vocab.json + merges.txt (default: the model's own)");
    app->add_option("--seed", seed, "Seed (default 0)");
    add_json_flag(app, json);
  }
};

int run_generate(const GenerateOptions& o) {
  auto [gpt, tokenizer, file] = open_gpt(o.model, o.open);
  const auto prompt = tokenizer->encode(o.prompt.empty() ? std::string("\n") : o.prompt);
  const auto generated = gpt->generate(prompt, o.tokens, o.temperature, o.top_k, o.seed);
  const auto text = tokenizer->decode(generated);
  if (o.json)
    // Sampled bytes need not be valid UTF-8: invalid sequences become U+FFFD in the JSON text;
    // "tokens" holds the exact bytes.
    std::cout << json_text(nlohmann::json({{"prompt", o.prompt}, {"text", text}, {"tokens", generated}, {"seed", o.seed}}))
              << "\n";
  else
    std::cout << o.prompt << text << "\n";
  return kSuccess;
}

}  // namespace

Command add_generate_command(CLI::App& parent) {
  return make_command<GenerateOptions>(parent, "generate",
                                       "Sample text from a μMoE GPT",
                                       run_generate);
}

}  // namespace mumoe::cli
