// IDX files, raw or gzipped (bombs included): read or refuse with a FileError.
#include "data/idx_file.h"
#include "fuzz_input.h"
#include "io/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return mumoe::fuzz::read_or_refuse<mumoe::FileError>(data, size,
                                                       [](const std::string& path) { mumoe::data::read_idx(path); });
}
