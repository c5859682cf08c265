// The token set a language-model analysis runs on: a byte stream cut into sequences of
// block_size tokens, each with its next-token targets. Galleries, per-token extraction and
// ablation all index tokens the same way: token k is position k % block_size of sequence
// k / block_size, and predicts the stream byte that follows it.
//
// Torch-free (plain vectors), so the GUI's token view can hold one.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "text/tokenizer.h"

namespace mumoe::analysis {

/// How many sequences a CLI analysis uses when none is asked for: 64 × block_size tokens
/// (8,192 for the demo GPT), one pass of the demo GPT in about a second on 2 cores.
inline constexpr int64_t kDefaultLmSequences = 64;

struct LmEvalSet {
  std::vector<int32_t> stream;             ///< the token stream (documents joined by "\n")
  std::vector<int64_t> document_starts;    ///< stream offset of each document, ascending, [0] = 0
  int64_t block_size = 0;                  ///< T: tokens per sequence
  int64_t sequences = 0;                   ///< S: sequence s reads stream[s·T, s·T + T)
  std::string identity;                    ///< e.g. "fortunes#validation(0.05,seed=0)#64x128"
  /// What turns the stream back into text (token contexts, class names); null: bytes.
  std::shared_ptr<const text::Tokenizer> tokenizer;

  int64_t tokens() const { return sequences * block_size; }
  /// The stream offset of analysed token k (k < tokens()).
  int64_t offset(int64_t token) const { return token; }  // sequences tile the stream without gaps
  int32_t input(int64_t token) const { return stream[token]; }
  int32_t target(int64_t token) const { return stream[token + 1]; }
  /// Index of the document containing stream offset `offset`.
  int64_t document_of(int64_t offset) const;
};

/// Cuts `stream` into consecutive sequences of block_size tokens (plus the one target after
/// the last), at most max_sequences of them (0 = as many as fit). The tail that does not fill
/// a sequence is left out: every sequence has the same length, so batches have one shape.
/// Throws UsageError when not even one sequence fits.
LmEvalSet make_lm_eval_set(std::vector<int32_t> stream, std::vector<int64_t> document_starts, int64_t block_size,
                           int64_t max_sequences, const std::string& identity);

/// The validation split of a text SPEC as `mumoe train` / `mumoe evaluate` make it
/// (text::split_documents with the model's validation_fraction and seed, documents joined with
/// "\n", tokens of `tokenizer` — the model's; null: bytes), cut by make_lm_eval_set. The
/// identity names a tokenizer other than bytes, so that caches keep their runs apart.
LmEvalSet load_lm_eval_set(const std::string& spec, double validation_fraction, uint64_t seed, int64_t block_size,
                           int64_t max_sequences, std::shared_ptr<const text::Tokenizer> tokenizer = nullptr);

/// The validation split a GPT was trained with, as its manifest's provenance records it
/// ("validation_fraction", default 0.05; "seed", default 0); fraction_override ≥ 0 replaces the
/// fraction. What every analysis and `predict` pass to load_lm_eval_set.
struct TrainingSplit {
  double validation_fraction = 0.05;
  uint64_t seed = 0;
};
TrainingSplit training_split(const nlohmann::json& provenance, double fraction_override = -1);

/// A window of ±radius tokens around analysed token k, inside its document and the stream.
struct TokenContext {
  std::string before;   ///< display text (text::escape_for_display) of the tokens before
  std::string token;    ///< display text of the token itself
  std::string after;    ///< display text of the tokens after
  int64_t first = 0;    ///< stream offset of the window's first token
  int64_t last = 0;     ///< one past the window's last token
};
TokenContext token_context(const LmEvalSet& set, int64_t token, int64_t radius);

}  // namespace mumoe::analysis
