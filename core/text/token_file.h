// Token streams stored as nanoGPT stores them: `train.bin` / `val.bin` are a flat little-endian
// uint16 array of token ids (its prepare scripts: np.array(ids, dtype=np.uint16).tofile(...);
// OpenWebText's train.bin is 17 GB). The data SPEC is "tokens:FILE". The file is memory-mapped
// and only the tokens asked for are read, so a 17 GB stream costs what its prefix costs.
// Plain C++ (no LibTorch).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mumoe::text {

/// True for a "tokens:FILE" SPEC.
bool is_token_spec(const std::string& spec);

struct TokenStream {
  std::vector<int32_t> tokens;  ///< the first tokens of the file, as asked for
  int64_t file_tokens = 0;      ///< how many the whole file holds
  /// "tokens:PATH#BYTES#MTIME#first=N": changes when the file or the part read does.
  std::string identity;
};

/// The first `max_tokens` tokens of a "tokens:FILE" SPEC (0: the whole file). Throws FileError
/// naming the file: missing or not a regular file, empty, an odd byte count (not uint16), or a
/// token id ≥ `vocabulary` (when > 0) with its position — a stream of another tokenizer.
TokenStream read_token_spec(const std::string& spec, int64_t max_tokens, int64_t vocabulary = 0);

}  // namespace mumoe::text
