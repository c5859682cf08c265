#include "text/bpe_tokenizer.h"
#include "io/json_file.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <queue>

#include "io/errors.h"
#include "text/gpt2_pretokenizer.h"
#include "text/text_corpus.h"
#include "text/utf8.h"

namespace mumoe::text {
namespace {

/// Ids are indexes of an id → bytes table; this bound keeps a corrupt vocab.json from asking
/// for gigabytes (real vocabularies have fewer than 300 000 tokens).
constexpr int64_t kMaxId = (int64_t{1} << 24) - 1;

/// Words longer than this are encoded but not cached: they are rare and would bloat the cache.
constexpr size_t kMaxCachedWordBytes = 64;
/// The cache is emptied when it reaches this many words, which bounds its memory.
constexpr size_t kMaxCachedWords = 1 << 17;

std::string display_quoted(const std::string& s) { return "\"" + escape_for_display(s) + "\""; }

std::string utf8_of(char32_t cp) {
  std::string out;
  append_utf8(out, cp);
  return out;
}

/// The byte each code point of the bytes_to_unicode alphabet stands for, or -1.
int byte_of_symbol(char32_t cp) {
  static const std::vector<int> table = [] {
    std::vector<int> t(512, -1);
    for (int b = 0; b < 256; ++b) t[gpt2_byte_symbols()[b]] = b;
    return t;
  }();
  return cp < table.size() ? table[cp] : -1;
}

/// The bytes a vocab.json string stands for. A character outside the byte alphabet (only
/// hand-added special tokens have them) stands for its own UTF-8 bytes.
std::string symbols_to_bytes(const std::string& token) {
  std::string bytes;
  size_t pos = 0;
  while (pos < token.size()) {
    const Utf8Char c = decode_utf8_at(token, pos);  // nlohmann::json only yields valid UTF-8
    const int b = c.error ? -1 : byte_of_symbol(c.value);
    if (b >= 0)
      bytes += static_cast<char>(static_cast<unsigned char>(b));
    else
      bytes.append(token, pos, static_cast<size_t>(c.length));
    pos += static_cast<size_t>(c.length);
  }
  return bytes;
}

nlohmann::json parse_vocab_json(const std::string& path) {
  const std::string text = read_utf8_file(path);
  return io::parse_bounded_json(text, path, "vocabulary");
}

/// A merges.txt line as its two parts; false when it is not "LEFT RIGHT".
bool split_merge_line(const std::string& line, std::string& left, std::string& right) {
  const size_t space = line.find(' ');
  if (space == std::string::npos || space == 0 || space + 1 == line.size()) return false;
  if (line.find(' ', space + 1) != std::string::npos) return false;
  left = line.substr(0, space);
  right = line.substr(space + 1);
  return true;
}

}  // namespace

const std::array<char32_t, 256>& gpt2_byte_symbols() {
  // bytes_to_unicode of GPT-2's encoder.py: the printable bytes of Latin-1 ('!'..'~', '¡'..'¬',
  // '®'..'ÿ') stand for themselves; the others, in increasing order, for U+0100, U+0101, …
  static const std::array<char32_t, 256> symbols = [] {
    std::array<char32_t, 256> s{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      s[b] = printable ? static_cast<char32_t>(b) : next++;
    }
    return s;
  }();
  return symbols;
}

struct BpeTokenizer::Cache {
  std::mutex mutex;
  std::unordered_map<std::string, std::vector<int32_t>> words;
};

BpeTokenizer::BpeTokenizer() : cache_(std::make_unique<Cache>()) {}
BpeTokenizer::BpeTokenizer(BpeTokenizer&&) noexcept = default;
BpeTokenizer& BpeTokenizer::operator=(BpeTokenizer&&) noexcept = default;
BpeTokenizer::~BpeTokenizer() = default;

BpeTokenizer BpeTokenizer::load(const std::string& vocab_json_path, const std::string& merges_txt_path,
                                const std::string& name) {
  BpeTokenizer t;
  t.vocab_path_ = vocab_json_path;
  t.name_ = name;

  // vocab.json: validate every entry before sizing the id table.
  const nlohmann::json vocab = parse_vocab_json(vocab_json_path);
  if (!vocab.is_object()) throw FileError(vocab_json_path, "expected a JSON object mapping token strings to ids");
  int64_t max_id = -1;
  std::vector<std::pair<std::string, int32_t>> entries;  // in the (sorted) order of the JSON object
  for (const auto& [token, value] : vocab.items()) {
    const std::string what = "the id of token " + display_quoted(token);
    if (!value.is_number_integer()) throw FileError(vocab_json_path, what + " is not an integer");
    if (!value.is_number_unsigned() && value.get<int64_t>() < 0)
      throw FileError(vocab_json_path, what + " is negative");
    if (value.get<uint64_t>() > static_cast<uint64_t>(kMaxId))
      throw FileError(vocab_json_path, what + " is larger than " + std::to_string(kMaxId));
    const auto id = static_cast<int32_t>(value.get<int64_t>());
    max_id = std::max<int64_t>(max_id, id);
    entries.emplace_back(token, id);
  }
  t.token_bytes_.resize(static_cast<size_t>(max_id + 1));
  t.present_.resize(static_cast<size_t>(max_id + 1), false);
  std::vector<const std::string*> owner(static_cast<size_t>(max_id + 1), nullptr);
  for (const auto& [token, id] : entries) {
    if (owner[id])
      throw FileError(vocab_json_path, "id " + std::to_string(id) + " is used by both " + display_quoted(*owner[id]) +
                                           " and " + display_quoted(token));
    owner[id] = &token;
    t.present_[id] = true;
    t.token_bytes_[id] = symbols_to_bytes(token);
    t.vocab_.emplace(token, id);
  }
  int missing = 0;
  std::string first_missing;
  for (int b = 0; b < 256; ++b) {
    const std::string symbol = utf8_of(gpt2_byte_symbols()[b]);
    const auto it = t.vocab_.find(symbol);
    if (it != t.vocab_.end()) {
      t.byte_ids_[b] = it->second;
    } else if (missing++ == 0) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", b);
      first_missing = "\"" + symbol + "\" (byte " + hex + ")";
    }
  }
  if (missing > 0)
    throw FileError(vocab_json_path, "the vocabulary lacks the byte symbol " + first_missing +
                                         (missing > 1 ? " and " + std::to_string(missing - 1) + " more" : "") +
                                         "; byte-level BPE needs all 256");

  // merges.txt: ranks are the order of the lines (a repeated pair is overwritten, like the dict
  // of GPT-2's encoder.py, so its last line counts).
  const std::string merges_text = read_utf8_file(merges_txt_path);
  size_t pos = 0;
  int line_number = 0;
  int32_t rank = 0;
  std::string left, right;
  while (pos < merges_text.size()) {
    size_t end = merges_text.find('\n', pos);
    if (end == std::string::npos) end = merges_text.size();
    std::string line = merges_text.substr(pos, end - pos);
    pos = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_number == 1 && line.rfind("#version", 0) == 0)) continue;
    const std::string where = "line " + std::to_string(line_number) + ": ";
    if (!split_merge_line(line, left, right))
      throw FileError(merges_txt_path, where + "expected \"LEFT RIGHT\", got " + display_quoted(line));
    const std::string in_vocab = " is not in the vocabulary (" + vocab_json_path + ")";
    const int32_t left_id = t.token_id(left);
    const int32_t right_id = t.token_id(right);
    const int32_t result_id = t.token_id(left + right);
    if (left_id < 0) throw FileError(merges_txt_path, where + display_quoted(left) + in_vocab);
    if (right_id < 0) throw FileError(merges_txt_path, where + display_quoted(right) + in_vocab);
    if (result_id < 0) throw FileError(merges_txt_path, where + "the merged token " + display_quoted(left + right) + in_vocab);
    t.merges_.insert_or_assign(pair_key(left_id, right_id), Merge{rank++, result_id});
  }
  return t;
}

int32_t BpeTokenizer::token_id(const std::string& vocab_string) const {
  const auto it = vocab_.find(vocab_string);
  return it == vocab_.end() ? -1 : it->second;
}

const std::string& BpeTokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size() || !present_[id])
    throw UsageError("token id " + std::to_string(id) + " is not in the vocabulary of " + name() + " (size " +
                     std::to_string(vocab_size()) + ")");
  return token_bytes_[id];
}

std::vector<int32_t> BpeTokenizer::encode_word(const std::string& word) const {
  // Symbols form a linked list over the byte positions; a merge keeps the left symbol and
  // unlinks the right one. Candidate pairs wait in a heap ordered by (rank, position).
  const auto n = static_cast<int32_t>(word.size());
  std::vector<int32_t> id(n), prev(n), next(n);
  std::vector<char> alive(n, 1);
  for (int32_t i = 0; i < n; ++i) {
    id[i] = byte_ids_[static_cast<unsigned char>(word[i])];
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    int32_t rank, left, right;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  std::vector<Candidate> pending;
  auto candidate = [&](int32_t left, int32_t right, std::vector<Candidate>& into) {
    const auto it = merges_.find(pair_key(id[left], id[right]));
    if (it != merges_.end()) into.push_back({it->second.rank, left, right});
  };
  for (int32_t i = 0; i + 1 < n; ++i) candidate(i, i + 1, pending);
  for (const auto& c : pending) heap.push(c);

  while (!heap.empty()) {
    // GPT-2 merges every occurrence of the best pair, left to right, before it looks for the
    // next best pair; pairs created meanwhile wait in `pending` so that a new pair of lower rank
    // cannot jump ahead of the remaining occurrences (possible only with unusual merge files).
    const int32_t rank = heap.top().rank;
    pending.clear();
    while (!heap.empty() && heap.top().rank == rank) {
      const Candidate c = heap.top();
      heap.pop();
      if (!alive[c.left] || !alive[c.right] || next[c.left] != c.right) continue;  // stale
      const auto it = merges_.find(pair_key(id[c.left], id[c.right]));
      if (it == merges_.end() || it->second.rank != c.rank) continue;  // a side changed since
      id[c.left] = it->second.result;
      alive[c.right] = 0;
      next[c.left] = next[c.right];
      if (next[c.left] >= 0) prev[next[c.left]] = c.left;
      if (prev[c.left] >= 0) candidate(prev[c.left], c.left, pending);
      if (next[c.left] >= 0) candidate(c.left, next[c.left], pending);
    }
    for (const auto& c : pending) heap.push(c);
  }

  std::vector<int32_t> ids;
  for (int32_t i = n > 0 ? 0 : -1; i >= 0; i = next[i]) ids.push_back(id[i]);
  return ids;
}

std::vector<int32_t> BpeTokenizer::encode(const std::string& text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3);
  std::string word;
  for (const std::string_view piece : gpt2_pretokenize(text)) {
    word.assign(piece);
    const bool cacheable = cache_ && word.size() <= kMaxCachedWordBytes;
    if (cacheable) {
      std::lock_guard<std::mutex> lock(cache_->mutex);
      const auto it = cache_->words.find(word);
      if (it != cache_->words.end()) {
        ids.insert(ids.end(), it->second.begin(), it->second.end());
        continue;
      }
    }
    std::vector<int32_t> word_ids = encode_word(word);
    ids.insert(ids.end(), word_ids.begin(), word_ids.end());
    if (cacheable) {
      std::lock_guard<std::mutex> lock(cache_->mutex);
      if (cache_->words.size() >= kMaxCachedWords) cache_->words.clear();
      cache_->words.emplace(word, std::move(word_ids));
    }
  }
  return ids;
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (const int32_t id : ids) out += token_bytes(id);
  return out;
}

std::string BpeTokenizer::token_text(int32_t id) const { return escape_for_display(token_bytes(id)); }

}  // namespace mumoe::text
