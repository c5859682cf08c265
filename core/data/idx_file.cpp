#include "data/idx_file.h"

#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "io/errors.h"

namespace mumoe::data {

std::vector<uint8_t> read_maybe_gzipped(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw FileError(path, "is a directory, not a data file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError(path, "cannot open the file (missing or unreadable)");
  std::vector<uint8_t> raw((std::istreambuf_iterator<char>(in)), {});
  if (raw.size() < 2 || raw[0] != 0x1f || raw[1] != 0x8b) return raw;

  z_stream stream{};
  if (inflateInit2(&stream, 15 + 16) != Z_OK) throw FileError(path, "cannot initialise gzip decoding");
  std::vector<uint8_t> out;
  std::vector<uint8_t> chunk(1 << 20);
  stream.next_in = raw.data();
  stream.avail_in = static_cast<uInt>(raw.size());
  int status = Z_OK;
  while (status != Z_STREAM_END) {
    stream.next_out = chunk.data();
    stream.avail_out = static_cast<uInt>(chunk.size());
    status = inflate(&stream, Z_NO_FLUSH);
    if (status != Z_OK && status != Z_STREAM_END) {
      inflateEnd(&stream);
      throw FileError(path, std::string("corrupt gzip data") + (stream.msg ? std::string(": ") + stream.msg : ""));
    }
    out.insert(out.end(), chunk.data(), chunk.data() + (chunk.size() - stream.avail_out));
    if (status == Z_OK && stream.avail_in == 0 && stream.avail_out != 0) {
      inflateEnd(&stream);
      throw FileError(path, "gzip data ends early (truncated file?)");
    }
  }
  inflateEnd(&stream);
  return out;
}

IdxArray read_idx(const std::string& path) {
  const auto bytes = read_maybe_gzipped(path);
  if (bytes.size() < 4 || bytes[0] != 0 || bytes[1] != 0)
    throw FileError(path, "not an IDX file (wrong magic number)");
  if (bytes[2] != 0x08)
    throw FileError(path, "IDX element type 0x" + std::to_string(bytes[2]) + " is not supported (only unsigned bytes, 0x08)");
  const int dims = bytes[3];
  if (dims < 1 || dims > 4) throw FileError(path, "IDX file with " + std::to_string(dims) + " dimensions");
  const size_t header = 4 + 4 * static_cast<size_t>(dims);
  if (bytes.size() < header) throw FileError(path, "IDX header is truncated");
  IdxArray array;
  uint64_t total = 1;
  for (int d = 0; d < dims; ++d) {
    const uint8_t* p = bytes.data() + 4 + 4 * d;
    const uint32_t n = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
    array.shape.push_back(n);
    total *= n;
  }
  if (bytes.size() - header != total)
    throw FileError(path, "IDX header announces " + std::to_string(total) + " values but the file holds " +
                              std::to_string(bytes.size() - header) + " (truncated or corrupt)");
  array.values.assign(bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end());
  return array;
}

}  // namespace mumoe::data
