// Feature files (features, labels, attributes, names): load or refuse with a FileError.
#include "data/feature_data.h"
#include "fuzz_input.h"
#include "io/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = mumoe::fuzz::write_input(data, size);
  try {
    mumoe::data::load_feature_file(path);
  } catch (const mumoe::FileError&) {
  }
  return 0;
}
