// Strict UTF-8 decoding and display escaping, shared by the corpus reader and the tokenizers.
//
// "Strict" follows Table 3-7 of the Unicode standard: overlong forms (C0/C1 leads, E0 80..9F,
// F0 80..8F), UTF-16 surrogates (ED A0..BF) and code points above U+10FFFF (F4 90.., F5..FF) are
// all invalid, as are stray continuation bytes and sequences cut short.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace mumoe::text {

/// One decoded code point, or the reason the bytes at that position are not UTF-8.
struct Utf8Char {
  char32_t value = 0;            ///< the code point (meaningless when error is set)
  int length = 1;                ///< bytes consumed: 1..4; an invalid position consumes 1 byte
  const char* error = nullptr;   ///< nullptr when valid, else e.g. "overlong encoding"
};

/// Decodes the code point starting at bytes[pos] (pos < bytes.size()).
Utf8Char decode_utf8_at(std::string_view bytes, size_t pos);

/// Where the first invalid sequence starts and why it is invalid.
struct Utf8Error {
  size_t offset = 0;
  const char* reason = "";
};

/// The first invalid sequence in `bytes`, or nothing when all of it is valid UTF-8.
std::optional<Utf8Error> find_utf8_error(std::string_view bytes);

/// Appends the UTF-8 encoding of `cp` (which must be a valid scalar value) to `out`.
void append_utf8(std::string& out, char32_t cp);

/// A readable rendering of arbitrary bytes (e.g. one token, for galleries): valid printable
/// characters as they are, "\n", "\t", "\r" and "\\" in C style, other control characters and
/// every byte that is not part of valid UTF-8 (tokens often hold half a character) as "\xNN",
/// C1 controls as "\u0085". The rendering is unambiguous: distinct inputs give distinct outputs.
std::string escape_for_display(std::string_view bytes);

}  // namespace mumoe::text
