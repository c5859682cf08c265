#include "io/json_file.h"

#include "io/errors.h"

namespace mumoe::io {

int json_nesting_depth(const std::string& text, int limit) noexcept {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest && (deepest = depth) >= limit) return deepest;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

nlohmann::json parse_bounded_json(const std::string& text, const std::string& path, const std::string& what) {
  const std::string subject = what.empty() ? "" : what + " ";
  if (json_nesting_depth(text) > kMaxJsonDepth)
    throw FileError(path, subject + "is JSON nested more than " + std::to_string(kMaxJsonDepth) +
                              " levels deep: refused (no file mumoe reads nests that deep)");
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw FileError(path, subject + "is not valid JSON: " + e.what());
  }
}

}  // namespace mumoe::io
