#include "text/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "io/errors.h"
#include "io/file_checks.h"

namespace mumoe::text {

bool is_token_spec(const std::string& spec) { return spec.rfind("tokens:", 0) == 0; }

TokenStream read_token_spec(const std::string& spec, int64_t max_tokens, int64_t vocabulary) {
  if (!is_token_spec(spec)) throw UsageError("'" + spec + "' is not a tokens:FILE SPEC");
  const std::string path = spec.substr(7);
  if (path.empty()) throw UsageError("tokens: needs a file, e.g. tokens:val.bin");
  if (max_tokens < 0) throw UsageError("the number of tokens to read must be ≥ 0 (0: all)");
  io::require_regular_file(path);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw FileError(path, std::string("cannot be read: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw FileError(path, std::string("cannot be read: ") + std::strerror(errno));
  }
  const auto bytes = static_cast<int64_t>(st.st_size);
  if (bytes == 0 || bytes % 2 != 0) {
    ::close(fd);
    throw FileError(path, bytes == 0 ? std::string("is empty: no tokens")
                                     : "holds " + std::to_string(bytes) +
                                           " bytes, an odd number: not a stream of uint16 token ids (nanoGPT's "
                                           "train.bin / val.bin)");
  }
  TokenStream out;
  out.file_tokens = bytes / 2;
  const int64_t count = max_tokens > 0 ? std::min(max_tokens, out.file_tokens) : out.file_tokens;
  // Only the prefix is mapped: the pages of the rest are never touched.
  void* mapped = ::mmap(nullptr, static_cast<size_t>(count * 2), PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (mapped == MAP_FAILED) throw FileError(path, std::string("cannot be mapped: ") + std::strerror(errno));
  const auto* p = static_cast<const unsigned char*>(mapped);
  out.tokens.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) out.tokens[i] = static_cast<int32_t>(p[2 * i] | (p[2 * i + 1] << 8));
  ::munmap(mapped, static_cast<size_t>(count * 2));
  if (vocabulary > 0)
    for (int64_t i = 0; i < count; ++i)
      if (out.tokens[i] >= vocabulary)
        throw FileError(path, "token " + std::to_string(i) + " is id " + std::to_string(out.tokens[i]) +
                                  ", outside the model's vocabulary of " + std::to_string(vocabulary) +
                                  ": a stream of another tokenizer?");
  out.identity = "tokens:" + path + "#" + std::to_string(bytes) + "#" +
                 std::to_string(static_cast<long long>(st.st_mtim.tv_sec)) + "." +
                 std::to_string(static_cast<long long>(st.st_mtim.tv_nsec)) + "#first=" + std::to_string(count);
  return out;
}

}  // namespace mumoe::text
