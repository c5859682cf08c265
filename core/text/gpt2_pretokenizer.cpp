#include "text/gpt2_pretokenizer.h"

#include <algorithm>
#include <iterator>

#include "text/utf8.h"

namespace mumoe::text {
namespace {

struct Range {
  char32_t first, last;
};

// Sorted, disjoint, inclusive ranges. Whitespace is tested before these tables, numbers before
// "other", so overlaps with earlier classes do not matter.
constexpr Range kWhitespace[] = {
    {0x09, 0x0D}, {0x20, 0x20},     {0x85, 0x85},     {0xA0, 0xA0},     {0x1680, 0x1680},
    {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000},
};

constexpr Range kNumbers[] = {
    {0x30, 0x39},       {0xB2, 0xB3},       {0xB9, 0xB9},       {0xBC, 0xBE},       {0x660, 0x669},
    {0x6F0, 0x6F9},     {0x7C0, 0x7C9},     {0x966, 0x96F},     {0x9E6, 0x9EF},     {0xA66, 0xA6F},
    {0xAE6, 0xAEF},     {0xB66, 0xB6F},     {0xBE6, 0xBF2},     {0xC66, 0xC6F},     {0xCE6, 0xCEF},
    {0xD66, 0xD78},     {0xE50, 0xE59},     {0xED0, 0xED9},     {0xF20, 0xF33},     {0x1040, 0x1049},
    {0x17E0, 0x17E9},   {0x1810, 0x1819},   {0x2070, 0x2070},   {0x2074, 0x2079},   {0x2080, 0x2089},
    {0x2150, 0x2182},   {0x2185, 0x2189},   {0x2460, 0x249B},   {0x24EA, 0x24FF},   {0x2776, 0x2793},
    {0x3007, 0x3007},   {0x3021, 0x3029},   {0x3038, 0x303A},   {0x3192, 0x3195},   {0x3220, 0x3229},
    {0x3248, 0x324F},   {0x3251, 0x325F},   {0x3280, 0x3289},   {0x32B1, 0x32BF},   {0xFF10, 0xFF19},
    {0x1D7CE, 0x1D7FF}, {0x1F100, 0x1F10C}, {0x1FBF0, 0x1FBF9},
};

constexpr Range kOther[] = {
    // ASCII punctuation and controls (the whitespace controls were classified before).
    {0x00, 0x2F}, {0x3A, 0x40}, {0x5B, 0x60}, {0x7B, 0x7F},
    // C1 controls, Latin-1 punctuation and symbols (ª µ º and the numbers are not in here).
    {0x80, 0xA9}, {0xAB, 0xB4}, {0xB6, 0xB9}, {0xBB, 0xBF}, {0xD7, 0xD7}, {0xF7, 0xF7},
    // Modifier symbols, combining diacritics, Greek and Cyrillic marks and punctuation.
    {0x2C2, 0x2C5}, {0x2D2, 0x2DF}, {0x2E5, 0x2EB}, {0x2ED, 0x2ED}, {0x2EF, 0x36F}, {0x37E, 0x37E},
    {0x384, 0x385}, {0x387, 0x387}, {0x483, 0x489},
    // Armenian, Hebrew and Arabic punctuation, points and signs.
    {0x55A, 0x55F}, {0x589, 0x58A}, {0x591, 0x5C7}, {0x5F3, 0x5F4}, {0x600, 0x61F}, {0x64B, 0x65F},
    {0x66A, 0x66D}, {0x670, 0x670}, {0x6D4, 0x6D4}, {0x6D6, 0x6E4}, {0x6E7, 0x6ED},
    // Thai and Lao vowel signs, tone marks and punctuation.
    {0xE31, 0xE31}, {0xE34, 0xE3A}, {0xE3F, 0xE3F}, {0xE47, 0xE4F}, {0xE5A, 0xE5B}, {0xEB1, 0xEB1},
    {0xEB4, 0xEBC}, {0xEC8, 0xECE},
    // Combining mark extensions.
    {0x1AB0, 0x1AFF}, {0x1DC0, 0x1DFF},
    // General punctuation (format characters such as ZWJ included), super/subscript operators,
    // currency, combining marks for symbols.
    {0x200B, 0x2027}, {0x202A, 0x202E}, {0x2030, 0x205E}, {0x2060, 0x206F}, {0x207A, 0x207E},
    {0x208A, 0x208E}, {0x20A0, 0x20FF},
    // The symbols among the letterlike symbols (℃ № ™ …; ℂ ℎ ℝ … are letters).
    {0x2100, 0x2101}, {0x2103, 0x2106}, {0x2108, 0x2109}, {0x2114, 0x2114}, {0x2116, 0x2118},
    {0x211E, 0x2123}, {0x2125, 0x2125}, {0x2127, 0x2127}, {0x2129, 0x2129}, {0x212E, 0x212E},
    {0x213A, 0x213B}, {0x2140, 0x2144}, {0x214A, 0x214D}, {0x214F, 0x214F},
    // Arrows, mathematical operators, technical symbols, control pictures, circled letters, box
    // drawing, blocks, shapes, miscellaneous symbols, dingbats, more arrows and symbols.
    {0x2190, 0x244A}, {0x249C, 0x24E9}, {0x2500, 0x2775}, {0x2794, 0x2BFF},
    // Supplemental punctuation, CJK radicals and description characters, CJK punctuation.
    {0x2E00, 0x2E2E}, {0x2E30, 0x2E7F}, {0x2E80, 0x2FFF}, {0x3001, 0x3004}, {0x3008, 0x3020}, {0x302A, 0x3030},
    {0x3036, 0x3037}, {0x303D, 0x303F}, {0x3099, 0x309C}, {0x30A0, 0x30A0}, {0x30FB, 0x30FB},
    {0x3190, 0x319F}, {0x31C0, 0x31E3}, {0x3200, 0x33FF}, {0x4DC0, 0x4DFF},
    // Private use, variation selectors, vertical/small/fullwidth punctuation and symbols, specials.
    {0xE000, 0xF8FF}, {0xFE00, 0xFE6B}, {0xFEFF, 0xFEFF}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF20},
    {0xFF3B, 0xFF40}, {0xFF5B, 0xFF65}, {0xFFE0, 0xFFEE}, {0xFFF9, 0xFFFD},
    // Musical symbols, mahjong/domino/playing cards, enclosed characters, emoji and pictographs.
    {0x1D100, 0x1D1FF}, {0x1F000, 0x1F0FF}, {0x1F10D, 0x1FBEF},
    // Tags, variation selectors supplement, supplementary private use planes.
    {0xE0000, 0xE01EF}, {0xF0000, 0x10FFFF},
};

template <size_t N>
bool in_table(const Range (&table)[N], char32_t cp) {
  // The first range whose last code point is ≥ cp is the only one that can hold it.
  const Range* it = std::lower_bound(std::begin(table), std::end(table), cp,
                                     [](const Range& r, char32_t c) { return r.last < c; });
  return it != std::end(table) && it->first <= cp;
}

/// Vowel signs, viramas and other marks of the Indic blocks from Devanagari to Malayalam, which
/// share one layout (each block is 0x80 code points with its marks at the same offsets).
bool is_indic_mark(char32_t cp) {
  if (cp < 0x900 || cp >= 0xD80) return false;
  if (cp == 0x964 || cp == 0x965) return true;  // danda and double danda (punctuation)
  // The few letters at mark offsets: Bengali anji, Tamil aytham, Kannada spacing candrabindu,
  // Malayalam chillus.
  if (cp == 0x980 || cp == 0xB83 || cp == 0xC80 || (cp >= 0xD54 && cp <= 0xD56)) return false;
  const char32_t off = cp & 0x7F;
  return off <= 0x03 || off == 0x3C || (off >= 0x3E && off <= 0x4D) || (off >= 0x51 && off <= 0x57) ||
         off == 0x62 || off == 0x63;
}

/// One unit of the text: a code point or a stray byte.
struct Unit {
  Gpt2CharClass cls;
  char32_t cp;  ///< the code point; for a stray byte a value no pattern literal matches
  size_t begin, end;
};

constexpr char32_t kStrayByte = 0xFFFFFFFF;

std::vector<Unit> decode_units(std::string_view text) {
  std::vector<Unit> units;
  units.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const Utf8Char c = decode_utf8_at(text, pos);
    const auto length = static_cast<size_t>(c.length);
    if (c.error)
      units.push_back({Gpt2CharClass::kOther, kStrayByte, pos, pos + 1});
    else
      units.push_back({gpt2_char_class(c.value), c.value, pos, pos + length});
    pos += length;
  }
  return units;
}

/// Length in units of the match of the first alternative of the pattern that matches at `i`.
size_t match_at(const std::vector<Unit>& u, size_t i) {
  const size_t n = u.size();
  auto cp = [&](size_t k) { return k < n ? u[k].cp : kStrayByte; };
  auto cls_at = [&](size_t k, Gpt2CharClass c) { return k < n && u[k].cls == c; };
  auto run = [&](size_t k, Gpt2CharClass c) {
    size_t e = k;
    while (e < n && u[e].cls == c) ++e;
    return e - k;
  };

  // 's|'t|'re|'ve|'m|'ll|'d
  if (cp(i) == '\'') {
    const char32_t a = cp(i + 1), b = cp(i + 2);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  }
  //  ?\p{L}+ |  ?\p{N}+ |  ?[^\s\p{L}\p{N}]+
  for (const auto c : {Gpt2CharClass::kLetter, Gpt2CharClass::kNumber, Gpt2CharClass::kOther}) {
    if (cp(i) == ' ' && cls_at(i + 1, c)) return 1 + run(i + 1, c);
    if (cls_at(i, c)) return run(i, c);
  }
  // \s+(?!\S) | \s+ — a whitespace run followed by a non-space gives up its last character
  // (when it has more than one) so that the next word can start with it.
  const size_t spaces = run(i, Gpt2CharClass::kWhitespace);
  if (i + spaces < n && spaces > 1) return spaces - 1;
  return spaces;
}

}  // namespace

Gpt2CharClass gpt2_char_class(char32_t cp) {
  if (in_table(kWhitespace, cp)) return Gpt2CharClass::kWhitespace;
  if (in_table(kNumbers, cp)) return Gpt2CharClass::kNumber;
  if (in_table(kOther, cp) || is_indic_mark(cp)) return Gpt2CharClass::kOther;
  return Gpt2CharClass::kLetter;
}

std::vector<std::string_view> gpt2_pretokenize(std::string_view text) {
  const std::vector<Unit> units = decode_units(text);
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < units.size()) {
    const size_t length = match_at(units, i);  // ≥ 1: every unit belongs to some class
    const size_t begin = units[i].begin, end = units[i + length - 1].end;
    words.push_back(text.substr(begin, end - begin));
    i += length;
  }
  return words;
}

}  // namespace mumoe::text
