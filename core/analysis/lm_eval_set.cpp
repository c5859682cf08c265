#include "analysis/lm_eval_set.h"

#include <algorithm>

#include "io/errors.h"
#include "text/byte_tokenizer.h"
#include "text/text_corpus.h"
#include "text/token_file.h"
#include "text/utf8.h"

namespace mumoe::analysis {

int64_t LmEvalSet::document_of(int64_t offset) const {
  const auto it = std::upper_bound(document_starts.begin(), document_starts.end(), offset);
  return std::max<int64_t>(0, static_cast<int64_t>(it - document_starts.begin()) - 1);
}

LmEvalSet make_lm_eval_set(std::vector<int32_t> stream, std::vector<int64_t> document_starts, int64_t block_size,
                           int64_t max_sequences, const std::string& identity) {
  if (block_size <= 0) throw UsageError("the block size must be positive");
  if (max_sequences < 0) throw UsageError("--max-sequences must be ≥ 0 (0: all)");
  const int64_t fit = stream.empty() ? 0 : (static_cast<int64_t>(stream.size()) - 1) / block_size;
  if (fit < 1)
    throw UsageError(identity + " has " + std::to_string(stream.size()) + " tokens: too few for one sequence of " +
                     std::to_string(block_size) + " tokens and its targets");
  LmEvalSet set;
  set.sequences = max_sequences > 0 ? std::min(fit, max_sequences) : fit;
  set.block_size = block_size;
  // Keep the stream up to the last target and the documents it touches.
  stream.resize(static_cast<size_t>(set.tokens() + 1));
  set.stream = std::move(stream);
  if (document_starts.empty() || document_starts.front() != 0) document_starts.insert(document_starts.begin(), 0);
  for (auto d : document_starts)
    if (d < static_cast<int64_t>(set.stream.size())) set.document_starts.push_back(d);
  set.identity = identity + "#" + std::to_string(set.sequences) + "x" + std::to_string(block_size);
  return set;
}

LmEvalSet load_lm_eval_set(const std::string& spec, double validation_fraction, uint64_t seed, int64_t block_size,
                           int64_t max_sequences, std::shared_ptr<const text::Tokenizer> tokenizer) {
  if (!tokenizer) tokenizer = std::make_shared<text::ByteTokenizer>();
  if (text::is_token_spec(spec)) {
    // Already tokens (nanoGPT's val.bin): only what the sequences need is read; one document.
    const int64_t needed = max_sequences > 0 ? max_sequences * block_size + 1 : 0;
    auto stream = text::read_token_spec(spec, needed, tokenizer->vocab_size());
    auto set = make_lm_eval_set(std::move(stream.tokens), {0}, block_size, max_sequences, stream.identity);
    set.tokenizer = std::move(tokenizer);
    return set;
  }
  const auto split = text::split_documents(text::load_text_spec(spec), validation_fraction, seed);
  // The same joining as the CLI's training and evaluation (app/cli/language_model.cpp).
  std::string joined;
  std::vector<int64_t> starts;
  for (const auto& d : split.validation.documents) {
    starts.push_back(static_cast<int64_t>(joined.size()));
    joined += d + "\n";
  }
  // Documents start at byte offsets; a BPE stream counts tokens: each start is mapped to the
  // number of tokens of the text before it (documents are encoded whole, "\n" ends each).
  std::vector<int32_t> stream;
  std::vector<int64_t> token_starts;
  if (tokenizer->name() == "byte") {
    stream = tokenizer->encode(joined);
    token_starts = std::move(starts);
  } else {
    for (const auto& d : split.validation.documents) {
      token_starts.push_back(static_cast<int64_t>(stream.size()));
      const auto ids = tokenizer->encode(d + "\n");
      stream.insert(stream.end(), ids.begin(), ids.end());
    }
  }
  const auto identity = tokenizer->name() == "byte" ? split.validation.identity
                                                    : split.validation.identity + "#" + tokenizer->name();
  auto set = make_lm_eval_set(std::move(stream), std::move(token_starts), block_size, max_sequences, identity);
  set.tokenizer = std::move(tokenizer);
  return set;
}

TrainingSplit training_split(const nlohmann::json& provenance, double fraction_override) {
  TrainingSplit split;
  if (provenance.is_object()) {
    split.validation_fraction = provenance.value("validation_fraction", split.validation_fraction);
    split.seed = provenance.value("seed", split.seed);
  }
  if (fraction_override >= 0) split.validation_fraction = fraction_override;
  return split;
}

TokenContext token_context(const LmEvalSet& set, int64_t token, int64_t radius) {
  if (token < 0 || token >= set.tokens())
    throw UsageError("token " + std::to_string(token) + " is outside the analysed set (0–" +
                     std::to_string(set.tokens() - 1) + ")");
  if (radius < 0) throw UsageError("the context radius must be ≥ 0");
  const int64_t at = set.offset(token);
  const int64_t doc = set.document_of(at);
  const int64_t doc_begin = set.document_starts[doc];
  const int64_t doc_end = doc + 1 < static_cast<int64_t>(set.document_starts.size())
                              ? set.document_starts[doc + 1]
                              : static_cast<int64_t>(set.stream.size());
  TokenContext c;
  c.first = std::max(doc_begin, at - radius);
  c.last = std::min(doc_end, at + radius + 1);
  // Decode the three token ranges separately so the token's own bytes stay marked even when it
  // is half a UTF-8 character (then it shows as "\xe2", as escape_for_display renders lone bytes).
  const text::ByteTokenizer bytes;
  const text::Tokenizer& tokenizer = set.tokenizer ? *set.tokenizer : bytes;
  auto text_of = [&](int64_t b, int64_t e) {
    return text::escape_for_display(
        tokenizer.decode(std::vector<int32_t>(set.stream.begin() + b, set.stream.begin() + e)));
  };
  c.before = text_of(c.first, at);
  c.token = text_of(at, at + 1);
  c.after = text_of(at + 1, c.last);
  return c;
}

}  // namespace mumoe::analysis
