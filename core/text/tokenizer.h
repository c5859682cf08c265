// The interface every tokenizer of a language model offers: text ↔ token ids, and a readable
// rendering of single tokens for the expert galleries.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mumoe::text {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  /// Token ids of `text` (any bytes; UTF-8 is what the tokenizers are designed for).
  virtual std::vector<int32_t> encode(const std::string& text) const = 0;

  /// The bytes the ids stand for; decode(encode(s)) == s. Throws UsageError for an id that is
  /// not in the vocabulary.
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;

  /// One more than the largest id: the number of rows an embedding table needs.
  virtual int64_t vocab_size() const = 0;

  /// The text of one token for display: its bytes with non-printables escaped ("\n", "\x07",
  /// a lone half of a multi-byte character as "\xe2"; see escape_for_display in text/utf8.h).
  /// Throws UsageError for an id that is not in the vocabulary.
  virtual std::string token_text(int32_t id) const = 0;

  /// A short description, e.g. "byte" or "gpt2-bpe:PATH/vocab.json".
  virtual std::string name() const = 0;
};

}  // namespace mumoe::text
