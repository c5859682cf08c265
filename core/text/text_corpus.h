// Plain-text corpora for language models: UTF-8 files, Debian fortune files, the text data SPECs
// of the command line ("text:FILE", "text:DIR", "fortunes", "fortunes:DIR") and a seeded
// train/validation split.
//
// Every reader validates UTF-8 strictly (see text/utf8.h) so that a corpus never carries bytes a
// tokenizer or a display would have to guess about; the error names the file and the byte offset.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mumoe::text {

/// Where Debian's `fortunes` / `fortunes-min` packages put their fortune files.
inline constexpr const char* kFortuneDir = "/usr/share/games/fortunes";

/// A list of documents (the unit a split assigns to train or validation) and where they came from.
struct TextCorpus {
  std::vector<std::string> documents;
  std::string identity;  ///< the SPEC it was loaded from, e.g. "fortunes" or "text:notes/"
};

/// Reads the whole file and checks that it is valid UTF-8; the bytes are returned unchanged
/// (a byte-order mark is kept). Throws FileError for a missing, unreadable or directory path and
/// for invalid UTF-8 ("invalid UTF-8 at byte 1234 (overlong encoding)").
std::string read_utf8_file(const std::string& path);

/// Splits the text of one fortune file into its entries: entries are separated by lines that
/// hold only "%" (a trailing "\r" is tolerated); trailing whitespace of each entry is removed
/// (leading whitespace is kept: it is part of ASCII art) and empty entries are dropped.
std::vector<std::string> split_fortunes(const std::string& text);

/// A file of a fortune directory that read_fortune_directory did not read, and why.
struct SkippedFile {
  std::string path;
  std::string reason;  ///< e.g. "index file (.dat)", "symbolic link", "invalid UTF-8 at byte 12 (…)"
};

/// Every fortune of every plain fortune file directly in `dir`, files in sorted name order.
/// Not read (and listed in `skipped` when given): the binary .dat indexes, symbolic links (the
/// .u8 links of Debian point at files that are read anyway), hidden files, anything that is not
/// a regular file, and files that are not valid UTF-8 or contain NUL bytes. Throws FileError
/// when `dir` is missing or not a directory; an empty result is not an error here.
std::vector<std::string> read_fortune_directory(const std::string& dir,
                                                std::vector<SkippedFile>* skipped = nullptr);

/// Parses and loads a text data SPEC:
///   text:FILE      one document, the whole file;
///   text:DIR       every *.txt file directly in DIR (sorted by name), one document each;
///   fortunes       one document per fortune of kFortuneDir;
///   fortunes:DIR   the same for another directory.
/// Everything after the first ':' is the path, so paths may contain ':'. Throws UsageError for
/// an unknown SPEC and FileError for a missing or invalid file, a directory without .txt files
/// and a fortune directory without fortunes.
TextCorpus load_text_spec(const std::string& spec);

/// The two halves of a corpus split.
struct CorpusSplit {
  TextCorpus train;
  TextCorpus validation;
};

/// Assigns round(validation_fraction × size) documents, chosen by a seeded SplitMix64 shuffle, to
/// validation and the rest to train; both keep the corpus order. A fraction strictly between 0
/// and 1 leaves at least one document on each side when the corpus has two or more. The same
/// corpus, fraction and seed always give the same split, on every platform. The identities
/// become e.g. "fortunes#validation(0.1,seed=7)". Throws UsageError for a fraction outside [0, 1].
CorpusSplit split_documents(const TextCorpus& corpus, double validation_fraction, uint64_t seed);

}  // namespace mumoe::text
