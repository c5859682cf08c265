#include "text/text_corpus.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "io/errors.h"
#include "io/file_checks.h"
#include "text/splitmix64.h"
#include "text/utf8.h"

namespace mumoe::text {
namespace fs = std::filesystem;

namespace {

// text: data is read whole and tokenized in memory (4 bytes a token): this bounds what a corpus
// may cost (a 500 MB text file reached 3.8 GB, issue 45). Larger corpora are token streams.
constexpr uintmax_t kMaxTextBytes = uintmax_t{64} << 20;

std::string too_much_text(uintmax_t bytes) {
  return std::to_string(bytes) + " bytes of text, more than the " + std::to_string(kMaxTextBytes) +
         "-byte limit of text: data (read whole); tokenize a larger corpus into nanoGPT's uint16 stream "
         "and give it as tokens:FILE";
}

std::string read_bytes(const std::string& path) {
  io::require_regular_file(path);  // a directory is named; a FIFO would block the read
  std::error_code size_error;
  const auto size = fs::file_size(path, size_error);
  if (!size_error && size > kMaxTextBytes) throw FileError(path, "holds " + too_much_text(size));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError(path, "cannot open the file (missing or unreadable)");
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  if (in.bad()) throw FileError(path, "read error");
  return bytes;
}

std::string utf8_problem(const Utf8Error& e) {
  return "invalid UTF-8 at byte " + std::to_string(e.offset) + " (" + e.reason + ")";
}

bool is_trailing_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

void add_entry(std::vector<std::string>& out, std::string entry) {
  while (!entry.empty() && is_trailing_space(entry.back())) entry.pop_back();
  if (!entry.empty()) out.push_back(std::move(entry));
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// The entries of `dir` sorted by name (byte order, so the result does not depend on locale).
std::vector<fs::directory_entry> sorted_entries(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) throw FileError(dir, "no such directory");
  if (!fs::is_directory(dir, ec)) throw FileError(dir, "is not a directory");
  std::vector<fs::directory_entry> entries;
  fs::directory_iterator it(dir, ec);
  if (ec) throw FileError(dir, "cannot list the directory: " + ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) throw FileError(dir, "cannot list the directory: " + ec.message());
    entries.push_back(*it);
  }
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return a.path().filename().string() < b.path().filename().string();
  });
  return entries;
}

/// Why a fortune directory entry is not a fortune file, or "" when it is one.
std::string fortune_skip_reason(const fs::directory_entry& entry) {
  const std::string name = entry.path().filename().string();
  std::error_code ec;
  if (entry.is_symlink(ec)) return "symbolic link";
  if (!entry.is_regular_file(ec)) return "not a regular file";
  if (!name.empty() && name[0] == '.') return "hidden file";
  if (ends_with(name, ".dat")) return "index file (.dat)";
  return "";
}

TextCorpus load_text_path(const std::string& path, const std::string& spec) {
  TextCorpus corpus;
  corpus.identity = spec;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw FileError(path, "no such file or directory");
  if (!fs::is_directory(path, ec)) {
    corpus.documents.push_back(read_utf8_file(path));
    return corpus;
  }
  uintmax_t total = 0;
  for (const auto& entry : sorted_entries(path)) {
    // is_regular_file follows symbolic links: a linked .txt file is as good as a copied one.
    if (ends_with(entry.path().filename().string(), ".txt") && entry.is_regular_file(ec)) {
      corpus.documents.push_back(read_utf8_file(entry.path().string()));
      total += corpus.documents.back().size();
      if (total > kMaxTextBytes) throw FileError(path, "holds " + too_much_text(total) + " (in its .txt files)");
    }
  }
  if (corpus.documents.empty()) throw FileError(path, "the directory holds no .txt files");
  return corpus;
}

TextCorpus load_fortunes(const std::string& dir, const std::string& spec) {
  std::vector<SkippedFile> skipped;
  TextCorpus corpus;
  corpus.identity = spec;
  corpus.documents = read_fortune_directory(dir, &skipped);
  if (corpus.documents.empty())
    throw FileError(dir, "no fortunes found (" + std::to_string(skipped.size()) + " files skipped)");
  return corpus;
}

std::string format_fraction(double f) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", f);
  return buffer;
}

}  // namespace

std::string read_utf8_file(const std::string& path) {
  std::string bytes = read_bytes(path);
  if (const auto error = find_utf8_error(bytes)) throw FileError(path, utf8_problem(*error));
  return bytes;
}

std::vector<std::string> split_fortunes(const std::string& text) {
  std::vector<std::string> out;
  std::string entry;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    const bool last = end == std::string::npos;
    if (last) end = text.size();
    const std::string_view line(text.data() + pos, end - pos);
    if (line == "%" || line == "%\r") {
      add_entry(out, std::move(entry));
      entry.clear();
    } else {
      entry.append(line);
      if (!last) entry += '\n';
    }
    pos = last ? end : end + 1;
  }
  add_entry(out, std::move(entry));
  return out;
}

std::vector<std::string> read_fortune_directory(const std::string& dir, std::vector<SkippedFile>* skipped) {
  std::vector<std::string> fortunes;
  auto skip = [&](const std::string& path, std::string reason) {
    if (skipped) skipped->push_back({path, std::move(reason)});
  };
  for (const auto& entry : sorted_entries(dir)) {
    const std::string path = entry.path().string();
    if (std::string reason = fortune_skip_reason(entry); !reason.empty()) {
      skip(path, std::move(reason));
      continue;
    }
    std::string text;
    try {
      text = read_bytes(path);
    } catch (const FileError& e) {
      skip(path, e.problem());
      continue;
    }
    // Other packages drop binary or legacy-encoded files here too (e.g. Latin-1 fortunes);
    // they are skipped rather than fatal because nobody chose them by name.
    if (const auto error = find_utf8_error(text)) {
      skip(path, utf8_problem(*error));
      continue;
    }
    if (text.find('\0') != std::string::npos) {
      skip(path, "contains NUL bytes (not a text file)");
      continue;
    }
    for (auto& fortune : split_fortunes(text)) fortunes.push_back(std::move(fortune));
  }
  return fortunes;
}

TextCorpus load_text_spec(const std::string& spec) {
  const size_t colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  const std::string rest = colon == std::string::npos ? "" : spec.substr(colon + 1);
  if (kind == "fortunes" && colon == std::string::npos) return load_fortunes(kFortuneDir, spec);
  if (kind == "fortunes" && !rest.empty()) return load_fortunes(rest, spec);
  if (kind == "text" && !rest.empty()) return load_text_path(rest, spec);
  throw UsageError("unknown text data SPEC '" + spec + "' (expected text:FILE, text:DIR, fortunes or fortunes:DIR)");
}

CorpusSplit split_documents(const TextCorpus& corpus, double validation_fraction, uint64_t seed) {
  if (!(validation_fraction >= 0.0 && validation_fraction <= 1.0))
    throw UsageError("the validation fraction must lie in [0, 1], not " + format_fraction(validation_fraction));
  const size_t n = corpus.documents.size();
  auto count = static_cast<size_t>(std::llround(validation_fraction * static_cast<double>(n)));
  if (validation_fraction > 0.0 && validation_fraction < 1.0 && n >= 2) count = std::clamp<size_t>(count, 1, n - 1);
  count = std::min(count, n);

  // A partial Fisher-Yates shuffle: its first `count` slots are a uniform random subset.
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  SplitMix64 rng(seed);
  for (size_t i = 0; i < count; ++i) std::swap(order[i], order[i + rng.below(n - i)]);
  std::vector<bool> in_validation(n, false);
  for (size_t i = 0; i < count; ++i) in_validation[order[i]] = true;

  CorpusSplit split;
  const std::string suffix = "(" + format_fraction(validation_fraction) + ",seed=" + std::to_string(seed) + ")";
  split.train.identity = corpus.identity + "#train" + suffix;
  split.validation.identity = corpus.identity + "#validation" + suffix;
  for (size_t i = 0; i < n; ++i)
    (in_validation[i] ? split.validation : split.train).documents.push_back(corpus.documents[i]);
  return split;
}

}  // namespace mumoe::text
