// The language-model side of the CLI: text SPECs become byte tokens, `mumoe train` on a text
// SPEC trains the byte-level μMoE GPT, `mumoe evaluate` reports loss / perplexity / next-byte
// accuracy for GPT models, and `mumoe generate` samples text.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "text/tokenizer.h"

namespace mumoe::cli {

/// "fortunes", "fortunes:DIR", "text:FILE", "text:DIR", "tokens:FILE" (text/token_file.h).
bool is_text_spec(const std::string& spec);

/// A text SPEC split by documents (seeded) and tokenized with `tokenizer` (each document ends
/// with "\n").
struct TextTokens {
  std::vector<int32_t> train, validation;
  int64_t train_documents = 0, validation_documents = 0;
};
TextTokens load_text_tokens(const std::string& spec, double validation_fraction, uint64_t seed,
                            const text::Tokenizer& tokenizer);

/// How a GPT file is opened by evaluate and generate: the head count of a plain state dict
/// (--heads; 0: its model_args, else width / 64) and the tokenizer (--tokenizer; "": the model's).
struct GptOpenOptions {
  int64_t heads = 0;
  std::string tokenizer;
  /// tokens:FILE data: how many of the stream's first tokens are evaluated (0: all).
  int64_t max_tokens = 1 << 20;
};

/// What `mumoe train` passes on for a text SPEC.
struct LanguageModelRequest {
  std::string data, output, command_line, device = "cpu";
  int64_t experts = 32, rank = 128, steps = 2000, block_size = 128, layers = 4, heads = 4, embd = 128;
  int64_t batch_size = 32, warmup = 100, checkpoint_every = 250;
  double learning_rate = 1e-3, weight_decay = 0.1, validation_fraction = 0.05;
  /// Router MLPs instead of μMoE blocks (nn::GptConfig::router_mlp): the router's name, each
  /// expert's hidden width (0: parameter-matched to nanoGPT's dense 4C MLP), the buffer capacity
  /// factor and the load-balancing loss weight.
  std::string mlp_router;
  std::string tokenizer = "byte";  ///< byte, gpt2 or a directory (text/tokenizer_choice.h)
  int64_t mlp_hidden = 0;
  double capacity_factor = 1.0, aux_loss_weight = 0.01;
  uint64_t seed = 0;
  bool resume = false, quiet = false, json = false;
};
int run_train_language_model(const LanguageModelRequest& request);

/// `mumoe evaluate` for a mumoe-gpt model file on a text SPEC (its validation split).
int run_evaluate_language_model(const std::string& model, const std::string& data, double validation_fraction,
                                const std::string& device, bool json, const GptOpenOptions& open = {});

}  // namespace mumoe::cli
