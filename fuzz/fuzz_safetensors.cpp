// The safetensors reader: open() must refuse any malformed header with a FileError, and read()
// of every entry it accepted must succeed or refuse the same way.
#include "fuzz_input.h"
#include "io/errors.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = mumoe::fuzz::write_input(data, size);
  try {
    const auto file = mumoe::io::SafetensorsFile::open(path);
    for (const auto& e : file.entries()) {
      try {
        file.read(e.name);
      } catch (const mumoe::FileError&) {
      }
    }
  } catch (const mumoe::FileError&) {
  }
  return 0;
}
