// IDX files, raw or gzipped (bombs included): read or refuse with a FileError.
#include "data/idx_file.h"
#include "fuzz_input.h"
#include "io/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = mumoe::fuzz::write_input(data, size);
  try {
    mumoe::data::read_idx(path);
  } catch (const mumoe::FileError&) {
  }
  return 0;
}
