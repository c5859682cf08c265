// Shared by the libFuzzer targets: the readers under test take paths, so each input is written
// to one file per process (in $TMPDIR), rewritten for every run.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace mumoe::fuzz {

inline std::string write_input(const uint8_t* data, size_t size, const char* suffix = "") {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/mumoe-fuzz-" + std::to_string(::getpid());
  }();
  const std::string file = path + suffix;
  FILE* f = std::fopen(file.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return file;
}

/// The target of a reader that takes a path: `read(path)` on the input written to a file, where
/// throwing `Refusal` is the reader's one allowed way to say no (anything else escapes, and
/// libFuzzer reports it, as it reports a crash).
template <typename Refusal, typename Read>
int read_or_refuse(const uint8_t* data, size_t size, Read read) {
  const auto path = write_input(data, size);
  try {
    read(path);
  } catch (const Refusal&) {
  }
  return 0;
}

}  // namespace mumoe::fuzz
