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

struct IdxArray {
  std::vector<int64_t> shape;
  std::vector<uint8_t> values;  ///< row-major
};

/// Reads `path` (gzip detected by its magic bytes). Throws FileError naming the file.
IdxArray read_idx(const std::string& path);

/// Reads the whole file, inflating it if it is gzip. Throws FileError.
std::vector<uint8_t> read_maybe_gzipped(const std::string& path);

}  // namespace mumoe::data
