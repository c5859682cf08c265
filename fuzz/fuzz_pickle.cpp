// The restricted unpickler on raw bytes: anything but a PickleError is a bug.
#include "io/pickle_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mumoe::io::PickleLimits limits;
  limits.max_values = 1'000'000;
  limits.max_memo = 1'000'000;
  try {
    mumoe::io::read_pickle(data, size, limits);
  } catch (const mumoe::io::PickleError&) {
  }
  return 0;
}
