// A BPE tokenizer's files (vocab.json, merges.txt) from the user (issue 44/45): the input is split
// at its first NUL byte into the two files; loading either refuses with a FileError or gives a
// tokenizer that round-trips a sample text.
#include <cstring>
#include <string>

#include "fuzz_input.h"
#include "io/errors.h"
#include "text/bpe_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto* nul = static_cast<const uint8_t*>(std::memchr(data, 0, size));
  const size_t split = nul ? static_cast<size_t>(nul - data) : size;
  const auto vocab = mumoe::fuzz::write_input(data, split, ".vocab.json");
  const auto merges = mumoe::fuzz::write_input(nul ? nul + 1 : data + size, nul ? size - split - 1 : 0, ".merges.txt");
  try {
    const auto tokenizer = mumoe::text::BpeTokenizer::load(vocab, merges);
    const std::string text = "Hello, world! Grüße — 日本語 \xff\xfe";
    if (tokenizer.decode(tokenizer.encode(text)) != text) __builtin_trap();
  } catch (const mumoe::Error&) {
  }
  return 0;
}
