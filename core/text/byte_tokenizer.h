// The simplest tokenizer: one token per byte, id = byte value (vocabulary of 256).
#pragma once

#include "text/tokenizer.h"

namespace mumoe::text {

/// Byte-exact in both directions for arbitrary bytes (NUL, 0xFF, invalid UTF-8 included).
/// Stateless, so safe to share between threads.
class ByteTokenizer final : public Tokenizer {
 public:
  std::vector<int32_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return 256; }
  std::string token_text(int32_t id) const override;
  std::string name() const override { return "byte"; }
};

}  // namespace mumoe::text
