#include "text/utf8.h"

#include <cstdint>
#include <cstdio>

namespace mumoe::text {
namespace {

bool is_continuation(unsigned char b) { return (b & 0xC0) == 0x80; }

Utf8Char invalid(const char* why) {
  Utf8Char c;
  c.error = why;
  return c;
}

}  // namespace

Utf8Char decode_utf8_at(std::string_view bytes, size_t pos) {
  const auto lead = static_cast<unsigned char>(bytes[pos]);
  if (lead < 0x80) return {lead, 1, nullptr};
  if (is_continuation(lead)) return invalid("unexpected continuation byte");
  if (lead == 0xC0 || lead == 0xC1) return invalid("overlong encoding");
  if (lead > 0xF4) return invalid("code point above U+10FFFF");

  const int length = lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
  // The allowed range of the second byte is what rules out overlongs, surrogates and values
  // above U+10FFFF (Unicode Table 3-7); later bytes are plain continuations.
  unsigned char low = 0x80, high = 0xBF;
  const char* second_error = "missing continuation byte";
  if (lead == 0xE0) low = 0xA0, second_error = "overlong encoding";
  if (lead == 0xED) high = 0x9F, second_error = "UTF-16 surrogate";
  if (lead == 0xF0) low = 0x90, second_error = "overlong encoding";
  if (lead == 0xF4) high = 0x8F, second_error = "code point above U+10FFFF";

  char32_t value = lead & (0x7F >> length);
  for (int i = 1; i < length; ++i) {
    if (pos + i >= bytes.size()) return invalid("sequence cut short by the end of the text");
    const auto b = static_cast<unsigned char>(bytes[pos + i]);
    if (!is_continuation(b)) return invalid("missing continuation byte");
    if (i == 1 && (b < low || b > high)) return invalid(second_error);
    value = (value << 6) | (b & 0x3F);
  }
  return {value, length, nullptr};
}

std::optional<Utf8Error> find_utf8_error(std::string_view bytes) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    // ASCII runs dominate real text; skip them without the general decoder.
    if (static_cast<unsigned char>(bytes[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const Utf8Char c = decode_utf8_at(bytes, pos);
    if (c.error) return Utf8Error{pos, c.error};
    pos += static_cast<size_t>(c.length);
  }
  return std::nullopt;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string escape_for_display(std::string_view bytes) {
  std::string out;
  char buffer[16];
  size_t pos = 0;
  while (pos < bytes.size()) {
    const Utf8Char c = decode_utf8_at(bytes, pos);
    if (c.error) {
      std::snprintf(buffer, sizeof buffer, "\\x%02x", static_cast<unsigned char>(bytes[pos]));
      out += buffer;
    } else if (c.value == '\n') {
      out += "\\n";
    } else if (c.value == '\t') {
      out += "\\t";
    } else if (c.value == '\r') {
      out += "\\r";
    } else if (c.value == '\\') {
      out += "\\\\";
    } else if (c.value < 0x20 || c.value == 0x7F) {
      std::snprintf(buffer, sizeof buffer, "\\x%02x", static_cast<unsigned>(c.value));
      out += buffer;
    } else if (c.value >= 0x80 && c.value < 0xA0) {
      std::snprintf(buffer, sizeof buffer, "\\u%04x", static_cast<unsigned>(c.value));
      out += buffer;
    } else {
      out.append(bytes.substr(pos, static_cast<size_t>(c.length)));
    }
    pos += static_cast<size_t>(c.length);
  }
  return out;
}

}  // namespace mumoe::text
