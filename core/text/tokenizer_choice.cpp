#include "text/tokenizer_choice.h"

#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>

#include "io/errors.h"
#include "text/bpe_tokenizer.h"
#include "text/byte_tokenizer.h"

namespace mumoe::text {
namespace {

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool holds_gpt2_files(const std::string& dir) { return is_file(dir + "/encoder.json") && is_file(dir + "/vocab.bpe"); }

std::string executable_directory() {
  char buffer[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  if (n <= 0) return "";
  std::string path(buffer, static_cast<size_t>(n));
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

}  // namespace

std::string gpt2_tokenizer_dir() {
  if (const char* env = std::getenv("MUMOE_GPT2_TOKENIZER"); env && *env) {
    if (!holds_gpt2_files(env))
      throw FileError(env, "($MUMOE_GPT2_TOKENIZER) holds no encoder.json and vocab.bpe");
    return env;
  }
  const auto installed = executable_directory() + "/../share/mumoe-studio/tokenizers/gpt2";
  if (holds_gpt2_files(installed)) return installed;
#ifdef MUMOE_SOURCE_RESOURCES
  const std::string source = MUMOE_SOURCE_RESOURCES "/tokenizers/gpt2";
  if (holds_gpt2_files(source)) return source;
#endif
  throw FileError(installed, "GPT-2's tokenizer files (encoder.json, vocab.bpe) are not installed here; "
                             "set MUMOE_GPT2_TOKENIZER to a directory holding them");
}

std::shared_ptr<const Tokenizer> make_tokenizer(const std::string& spec) {
  if (spec == "byte") return std::make_shared<ByteTokenizer>();
  if (spec == "gpt2") {
    const auto dir = gpt2_tokenizer_dir();
    return std::make_shared<BpeTokenizer>(BpeTokenizer::load(dir + "/encoder.json", dir + "/vocab.bpe", "gpt2"));
  }
  if (!is_directory(spec))
    throw UsageError("tokenizer '" + spec + "': expected byte, gpt2 or a directory with vocab.json + merges.txt "
                     "(or encoder.json + vocab.bpe)");
  if (is_file(spec + "/vocab.json") && is_file(spec + "/merges.txt"))
    return std::make_shared<BpeTokenizer>(BpeTokenizer::load(spec + "/vocab.json", spec + "/merges.txt"));
  if (holds_gpt2_files(spec))
    return std::make_shared<BpeTokenizer>(BpeTokenizer::load(spec + "/encoder.json", spec + "/vocab.bpe"));
  throw UsageError("tokenizer directory " + spec + " holds neither vocab.json + merges.txt nor encoder.json + vocab.bpe");
}

std::string tokenizer_for_vocabulary(int64_t embedding_rows) {
  if (embedding_rows == 256) return "byte";
  if (embedding_rows >= 50257 && embedding_rows <= 50304) return "gpt2";
  return "";
}

}  // namespace mumoe::text
