// Numbers as the CLI, reports and contact sheets print them: printf's fixed and significant-digit
// forms as std::string, so that no caller keeps a char buffer of its own.
#pragma once

#include <cstdio>
#include <string>

namespace mumoe::io {

/// `value` with `decimals` digits after the point ("%.*f"): fixed_text(0.5, 2) = "0.50".
inline std::string fixed_text(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

/// `value` with at most `digits` significant digits ("%.*g"): significant_text(0.12345, 3) = "0.123".
inline std::string significant_text(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*g", digits, value);
  return text;
}

}  // namespace mumoe::io
