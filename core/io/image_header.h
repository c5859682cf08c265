// The size an image file says it has, read from its header before anything is decoded, so that a
// hostile header cannot make the decoder allocate gigabytes: a 780-byte JPEG claiming 20000×20000
// pixels peaked at 10.5 GB, a 100-byte 1×5000 PNG at 7.3 GB once its short side was scaled up
// (issue 45). PNG (IHDR), JPEG (the first SOF marker) and BMP (BITMAPINFOHEADER and later) are
// read; plain C++, no decoder.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace mumoe::io {

struct ImageSize {
  int64_t width = 0;
  int64_t height = 0;
};

/// At most this many pixels per image (64 M: a 48-megapixel photograph passes, its decoded copies
/// staying well inside the streamed sets' memory promise).
inline constexpr int64_t kMaxImagePixels = int64_t{64} << 20;
/// At most this ratio of the long side to the short one (scaling the short side up to a model's
/// input size must not make the long side enormous).
inline constexpr int64_t kMaxImageAspect = 32;

/// The header's size of `bytes` (a file's first bytes: 64 KiB find any JPEG's frame header in
/// practice), or nullopt when the format is not recognised or the header is incomplete.
std::optional<ImageSize> parse_image_header(const unsigned char* bytes, std::size_t count);

/// Reads `path`'s header and checks it against the limits before the caller decodes. Throws
/// FileError naming the file: "cannot be read: Permission denied", "says it is 20000×20000
/// pixels, more than the 67108864-pixel limit", "is 1×5000 pixels, more than 32 times as long as
/// it is wide", "says it is 0×0 pixels". Returns the size, or nullopt when the header is not
/// recognised (the decoder then judges the file).
std::optional<ImageSize> check_image_header(const std::string& path);

}  // namespace mumoe::io
