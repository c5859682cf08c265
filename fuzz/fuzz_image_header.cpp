// Image headers (PNG, JPEG, BMP) read before decoding (issue 45): a size or a refusal, never a
// crash or a read past the bytes given.
#include <cstdint>
#include <cstddef>

#include "io/image_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)mumoe::io::parse_image_header(data, size);
  return 0;
}
