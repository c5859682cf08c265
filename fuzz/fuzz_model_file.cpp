// Model files (manifest, inferred state dicts): load, then build every layer, or refuse with a
// mumoe::Error.
#include "fuzz_input.h"
#include "io/errors.h"
#include "model/model_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = mumoe::fuzz::write_input(data, size);
  try {
    const auto file = mumoe::model::ModelFile::load(path);
    for (const auto& layer : file.manifest().layers) {
      try {
        file.build_layer(layer.name);
      } catch (const mumoe::Error&) {
      }
    }
  } catch (const mumoe::Error&) {
  }
  return 0;
}
