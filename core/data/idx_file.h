// Reader for the IDX format of MNIST / Fashion-MNIST, gzipped or raw.
//
// IDX: 2 zero bytes, a type byte (0x08 = unsigned byte), the number of dimensions, then one
// big-endian uint32 per dimension and the data. The reader validates the magic, the type, the
// dimension count and that the file holds exactly the announced number of bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mumoe::data {

/// The most bytes an IDX file may hold (values and header), gzipped or not: four times the
/// largest data set this program is for (ImageNet's validation images at 224², 7.5 GB, would not
/// be IDX anyway), and a bound on what a hostile header can make the reader allocate.
inline constexpr uint64_t kMaxIdxBytes = 4ull << 30;

struct IdxArray {
  std::vector<int64_t> shape;
  std::vector<uint8_t> values;  ///< row-major
};

/// Reads `path` (gzip detected by its magic bytes). Gzip data is inflated as a stream and only
/// up to the size the IDX header announces (and no further than deflate's 1032:1 ratio allows),
/// so a decompression bomb is refused after a few megabytes. Throws FileError naming the file.
IdxArray read_idx(const std::string& path);

}  // namespace mumoe::data
