// JSON that comes from a file (a model's manifest, a sidecar, class names, edits, tokenizer
// files, a cache's stored answers) is parsed through parse_bounded_json: nesting deeper than
// kMaxJsonDepth is refused before nlohmann::json builds anything, because its copy and compare are
// recursive — a manifest nested 100,000 deep overflowed the stack (issue 45). No file mumoe reads
// nests deeper than a dozen levels.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace mumoe::io {

inline constexpr int kMaxJsonDepth = 200;

/// The deepest nesting of arrays and objects in `text` (brackets inside strings do not count);
/// stops counting past `limit`. Never throws.
int json_nesting_depth(const std::string& text, int limit = kMaxJsonDepth + 1) noexcept;

/// Parses `text`, read from `path` (`what`, if given, names the part of the file: "manifest",
/// "header"). Throws FileError naming `path` — "WHAT is not valid JSON: …" or "WHAT: JSON nested
/// more than 200 levels deep …" — when the text is not JSON or nests deeper than kMaxJsonDepth.
nlohmann::json parse_bounded_json(const std::string& text, const std::string& path, const std::string& what = "");

}  // namespace mumoe::io
