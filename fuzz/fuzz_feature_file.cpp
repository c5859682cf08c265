// Feature files (features, labels, attributes, names): load or refuse with a FileError.
#include "data/feature_data.h"
#include "fuzz_input.h"
#include "io/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return mumoe::fuzz::read_or_refuse<mumoe::FileError>(
      data, size, [](const std::string& path) { mumoe::data::load_feature_file(path); });
}
