// GPT-2's byte-level byte-pair encoding, read from the vocab.json + merges.txt pair that GPT-2,
// RoBERTa and many Hugging Face models ship.
//
// Encoding: the text is cut into words by gpt2_pretokenize (text/gpt2_pretokenizer.h, whose
// header documents where its character classes approximate GPT-2's), each word's bytes become
// the byte symbols of GPT-2's bytes_to_unicode alphabet (printable Latin-1 characters stand for
// themselves, the other bytes for U+0100.., e.g. space → "Ġ", newline → "Ċ"), and merges are
// applied lowest rank first until none applies. Any byte string encodes (bytes that are not
// UTF-8 are single-byte words), and decode(encode(s)) == s always.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/tokenizer.h"

namespace mumoe::text {

/// GPT-2's bytes_to_unicode: the code point that stands for each byte in vocab.json and
/// merges.txt.
const std::array<char32_t, 256>& gpt2_byte_symbols();

/// Immutable after load() except for a per-word cache, which is guarded by a mutex: one
/// tokenizer may be shared by several threads. Movable, not copyable.
class BpeTokenizer final : public Tokenizer {
 public:
  /// Reads and validates both files. vocab.json: one JSON object mapping token strings to
  /// distinct ids in [0, 2^31); all 256 byte symbols must be present. merges.txt: an optional
  /// "#version…" first line, then one "LEFT RIGHT" pair per line in rank order (blank lines
  /// ignored; a repeated pair takes its last rank, as in GPT-2's encoder.py); both parts and their concatenation must be
  /// in the vocabulary. Throws FileError naming the file (and the line of merges.txt) for a
  /// missing file, invalid JSON, a non-integer, negative or duplicate id, a missing byte symbol
  /// (the first one is named) or a bad merge line.
  /// `name`: what name() returns ("" = "gpt2-bpe:" + the vocab.json path); the shipped GPT-2
  /// tokenizer is "gpt2" wherever it is installed.
  static BpeTokenizer load(const std::string& vocab_json_path, const std::string& merges_txt_path,
                           const std::string& name = "");

  BpeTokenizer(BpeTokenizer&&) noexcept;
  BpeTokenizer& operator=(BpeTokenizer&&) noexcept;
  ~BpeTokenizer() override;

  std::vector<int32_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  /// max id + 1; ids below it that no token has (gaps) are rejected by decode and token_text.
  int64_t vocab_size() const override { return static_cast<int64_t>(token_bytes_.size()); }
  std::string token_text(int32_t id) const override;
  /// The name given to load(), else "gpt2-bpe:" + the vocab.json path.
  std::string name() const override { return name_.empty() ? "gpt2-bpe:" + vocab_path_ : name_; }

  /// The number of distinct merge rules (GPT-2 has 50000).
  size_t merge_count() const { return merges_.size(); }
  /// The id of a token given in the vocab.json alphabet (e.g. "Ġthe"), or -1.
  int32_t token_id(const std::string& vocab_string) const;
  /// The bytes a token stands for. Throws UsageError for an id that is not in the vocabulary.
  const std::string& token_bytes(int32_t id) const;

 private:
  struct Merge {
    int32_t rank;
    int32_t result;  ///< id of the merged token
  };
  struct Cache;

  BpeTokenizer();
  std::vector<int32_t> encode_word(const std::string& word) const;
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }

  std::string vocab_path_;
  std::string name_;
  std::unordered_map<std::string, int32_t> vocab_;  ///< vocab.json string → id
  std::vector<std::string> token_bytes_;            ///< id → bytes
  std::vector<bool> present_;                       ///< id → whether some token has this id
  std::array<int32_t, 256> byte_ids_{};             ///< byte → id of its byte symbol
  std::unordered_map<uint64_t, Merge> merges_;      ///< (left id, right id) → rank and result
  std::unique_ptr<Cache> cache_;
};

}  // namespace mumoe::text
