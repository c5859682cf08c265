// GPT-2's pre-tokenisation, written out by hand: the regular expression
//
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// cuts text into words before byte-pair merging (std::regex cannot express \p{L}). The
// alternatives are tried in this order at each position, with the regex engine's greedy
// backtracking reproduced exactly (e.g. "\s+(?!\S)" leaves the last space of a run to the next
// word: "a  b" → "a", " ", " b"). The contractions are case-sensitive, as in GPT-2 ("I'M" →
// "I", "'", "M").
//
// Character classes — exact for ASCII, approximate beyond:
//  * whitespace (\s): exactly Unicode's White_Space set (tab..CR, space, U+0085, U+00A0,
//    U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000);
//  * numbers (\p{N}): ASCII digits plus a table of the common non-ASCII ones (Latin-1
//    superscripts and fractions, the decimal digits of Arabic, the main Indic scripts, Thai,
//    Lao, Tibetan, Myanmar, Khmer, Mongolian and fullwidth forms, super/subscripts, Roman
//    numerals, circled numbers, CJK numerals such as U+3007);
//  * other ([^\s\p{L}\p{N}]): ASCII punctuation and controls, plus a table of the common
//    non-ASCII punctuation, symbols, combining marks and format characters (Latin-1
//    punctuation, × and ÷, combining diacritics, Greek/Armenian/Hebrew/Arabic punctuation and
//    points, Indic and Thai/Lao vowel signs, general punctuation, currency, letterlike symbols,
//    arrows, mathematical operators, box drawing, shapes, dingbats, CJK and fullwidth
//    punctuation, variation selectors, emoji, private use);
//  * letters (\p{L}): everything else. So rarer punctuation, symbols and marks (e.g. those
//    of Tibetan, Ethiopic, Sinhala and historic scripts) and rarer digits count as letters and
//    stay inside a word, where GPT-2 would split them off. Compared with Python's `regex`
//    module (Unicode 14) over all code points, that is the only kind of error: every letter and
//    every space is classified right, nothing is taken for a number or "other" that is not one,
//    and about 3 450 "other" and 1 230 number code points (of ~144 000 assigned) are taken for
//    letters. Text in common scripts tokenises exactly as in GPT-2.
// Bytes that are not valid UTF-8 (GPT-2 never sees them) count as "other", one byte each, so any
// byte string still splits into pieces that concatenate back to it.
#pragma once

#include <string_view>
#include <vector>

namespace mumoe::text {

enum class Gpt2CharClass { kLetter, kNumber, kWhitespace, kOther };

/// The class of one code point, as described above.
Gpt2CharClass gpt2_char_class(char32_t cp);

/// The words of `text` in order, as views into `text`; their concatenation is `text`.
std::vector<std::string_view> gpt2_pretokenize(std::string_view text);

}  // namespace mumoe::text
