#include "data/idx_file.h"

#include <zlib.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <limits>

#include "io/errors.h"
#include "io/file_checks.h"

namespace mumoe::data {
namespace {

// Deflate cannot expand data by more than about 1032:1, so a gzip file of n bytes that claims to
// hold more than this many times n is lying (a decompression bomb, or corrupt).
constexpr uint64_t kMaxDeflateRatio = 1032;

uint32_t read_be_u32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// How many bytes the IDX file in `bytes` may hold in all, judged from its header as far as it
// has been read: unlimited until the header is complete, then header + announced values.
// Throws FileError for a header that cannot be valid.
uint64_t idx_size_limit(const std::string& path, const std::vector<uint8_t>& bytes) {
  if (bytes.size() < 4) return std::numeric_limits<uint64_t>::max();
  if (bytes[0] != 0 || bytes[1] != 0) throw FileError(path, "not an IDX file (wrong magic number)");
  if (bytes[2] != 0x08)
    throw FileError(path, "IDX element type 0x" + std::to_string(bytes[2]) + " is not supported (only unsigned bytes, 0x08)");
  const int dims = bytes[3];
  if (dims < 1 || dims > 4) throw FileError(path, "IDX file with " + std::to_string(dims) + " dimensions");
  const uint64_t header = 4 + 4 * static_cast<uint64_t>(dims);
  if (bytes.size() < header) return std::numeric_limits<uint64_t>::max();
  long double total = 1;  // up to 2^128: no integer type would do
  for (int d = 0; d < dims; ++d) total *= read_be_u32(bytes.data() + 4 + 4 * d);
  if (total > static_cast<long double>(kMaxIdxBytes))
    throw FileError(path, "IDX header announces " + std::to_string(static_cast<double>(total)) +
                              " values, more than the " + std::to_string(kMaxIdxBytes) + "-byte limit");
  return header + static_cast<uint64_t>(total);
}

// Inflates gzip `raw` into memory, refusing to produce more than limit(output so far) bytes.
std::vector<uint8_t> inflate_bounded(const std::string& path, std::vector<uint8_t>& raw,
                                     const std::function<uint64_t(const std::vector<uint8_t>&)>& limit) {
  z_stream stream{};
  if (inflateInit2(&stream, 15 + 16) != Z_OK) throw FileError(path, "cannot initialise gzip decoding");
  struct End {
    z_stream* s;
    ~End() { inflateEnd(s); }
  } end{&stream};
  const uint64_t ratio_limit = static_cast<uint64_t>(raw.size()) * kMaxDeflateRatio;
  std::vector<uint8_t> out;
  std::vector<uint8_t> chunk(1 << 20);
  stream.next_in = raw.data();
  stream.avail_in = static_cast<uInt>(raw.size());
  int status = Z_OK;
  while (status != Z_STREAM_END) {
    stream.next_out = chunk.data();
    stream.avail_out = static_cast<uInt>(chunk.size());
    status = inflate(&stream, Z_NO_FLUSH);
    if (status != Z_OK && status != Z_STREAM_END)
      throw FileError(path, std::string("corrupt gzip data") + (stream.msg ? std::string(": ") + stream.msg : ""));
    out.insert(out.end(), chunk.data(), chunk.data() + (chunk.size() - stream.avail_out));
    const uint64_t allowed = std::min(limit(out), ratio_limit);
    if (out.size() > allowed)
      throw FileError(path, "gzip data inflates to more than the " + std::to_string(allowed) +
                                " bytes the IDX header announces (a decompression bomb, or corrupt)");
    if (status == Z_OK && stream.avail_in == 0 && stream.avail_out != 0)
      throw FileError(path, "gzip data ends early (truncated file?)");
  }
  return out;
}

}  // namespace

IdxArray read_idx(const std::string& path) {
  io::require_regular_file(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError(path, "cannot open the file (unreadable)");
  std::vector<uint8_t> raw((std::istreambuf_iterator<char>(in)), {});
  // Gzip is inflated only as far as the header allows, so a bomb stops at the announced size.
  auto bytes = raw.size() >= 2 && raw[0] == 0x1f && raw[1] == 0x8b
                   ? inflate_bounded(path, raw, [&path](const std::vector<uint8_t>& b) { return idx_size_limit(path, b); })
                   : std::move(raw);
  if (bytes.size() < 4) throw FileError(path, "not an IDX file (" + std::to_string(bytes.size()) + " bytes)");
  const uint64_t limit = idx_size_limit(path, bytes);  // validates the header
  const int dims = bytes[3];
  const size_t header = 4 + 4 * static_cast<size_t>(dims);
  if (bytes.size() < header) throw FileError(path, "IDX header is truncated");
  IdxArray array;
  for (int d = 0; d < dims; ++d) array.shape.push_back(read_be_u32(bytes.data() + 4 + 4 * d));
  const uint64_t total = limit - header;
  if (bytes.size() - header != total)
    throw FileError(path, "IDX header announces " + std::to_string(total) + " values but the file holds " +
                              std::to_string(bytes.size() - header) + " (truncated or corrupt)");
  array.values.assign(bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end());
  return array;
}

}  // namespace mumoe::data
