#include "io/image_header.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "io/errors.h"

namespace mumoe::io {
namespace {

uint32_t big_endian32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}
uint32_t big_endian16(const unsigned char* p) { return (uint32_t{p[0]} << 8) | p[1]; }
int32_t little_endian32(const unsigned char* p) {
  return static_cast<int32_t>(uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24));
}

std::optional<ImageSize> png_size(const unsigned char* b, std::size_t n) {
  static const unsigned char signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (n < 24 || std::memcmp(b, signature, 8) != 0 || std::memcmp(b + 12, "IHDR", 4) != 0) return std::nullopt;
  return ImageSize{big_endian32(b + 16), big_endian32(b + 20)};
}

// Walks the JPEG's marker segments to the first start-of-frame (SOF0–SOF15 but DHT C4, JPG C8,
// DAC CC), whose payload holds the height and the width.
std::optional<ImageSize> jpeg_size(const unsigned char* b, std::size_t n) {
  if (n < 4 || b[0] != 0xFF || b[1] != 0xD8) return std::nullopt;
  std::size_t i = 2;
  while (i + 4 <= n) {
    if (b[i] != 0xFF) return std::nullopt;
    const unsigned char marker = b[i + 1];
    if (marker == 0xFF) {  // fill byte
      ++i;
      continue;
    }
    if (marker == 0xD8 || marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) {  // no payload
      i += 2;
      continue;
    }
    const std::size_t length = big_endian16(b + i + 2);
    if (length < 2) return std::nullopt;
    const bool frame = marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
    if (frame) {
      if (i + 9 > n) return std::nullopt;
      return ImageSize{big_endian16(b + i + 7), big_endian16(b + i + 5)};
    }
    if (marker == 0xDA || marker == 0xD9) return std::nullopt;  // scan data before any frame header
    i += 2 + length;
  }
  return std::nullopt;
}

std::optional<ImageSize> bmp_size(const unsigned char* b, std::size_t n) {
  if (n < 26 || b[0] != 'B' || b[1] != 'M') return std::nullopt;
  const int32_t header = little_endian32(b + 14);
  if (header < 40) return std::nullopt;  // OS/2 BITMAPCOREHEADER: 16-bit sizes, small anyway
  const int64_t width = little_endian32(b + 18), height = little_endian32(b + 22);
  return ImageSize{width < 0 ? -width : width, height < 0 ? -height : height};  // negative: top-down
}

}  // namespace

std::optional<ImageSize> parse_image_header(const unsigned char* bytes, std::size_t count) {
  if (auto s = png_size(bytes, count)) return s;
  if (auto s = jpeg_size(bytes, count)) return s;
  return bmp_size(bytes, count);
}

std::optional<ImageSize> check_image_header(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw FileError(path, std::string("cannot be read: ") + std::strerror(errno));
  std::vector<unsigned char> head(64 * 1024);
  std::size_t got = 0;
  while (got < head.size()) {
    const ssize_t n = ::read(fd, head.data() + got, head.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  const auto size = parse_image_header(head.data(), got);
  if (!size) return std::nullopt;
  const auto w = size->width, h = size->height;
  const std::string dims = std::to_string(w) + "×" + std::to_string(h);
  if (w <= 0 || h <= 0) throw FileError(path, "says it is " + dims + " pixels: not an image");
  if (w > kMaxImagePixels / h)
    throw FileError(path, "says it is " + dims + " pixels, more than the " + std::to_string(kMaxImagePixels) +
                              "-pixel limit per image: refused before decoding");
  if (std::max(w, h) > kMaxImageAspect * std::min(w, h))
    throw FileError(path, "is " + dims + " pixels, more than " + std::to_string(kMaxImageAspect) +
                              " times as long as it is wide: refused (scaled to a model's input it would be enormous)");
  return size;
}

}  // namespace mumoe::io
