// PyTorch checkpoints (zip + pickle + storage records): open and read every tensor, or refuse
// with a FileError.
#include "fuzz_input.h"
#include "io/errors.h"
#include "io/pytorch_checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = mumoe::fuzz::write_input(data, size, ".pth");
  try {
    const auto file = mumoe::io::PytorchCheckpoint::open(path);
    for (const auto& e : file->entries()) {
      try {
        file->read(e.name);
      } catch (const mumoe::FileError&) {
      }
    }
  } catch (const mumoe::Error&) {
  }
  return 0;
}
