#include "io/file_checks.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "io/errors.h"

namespace mumoe::io {

const char* non_regular_kind(unsigned int st_mode) {
  const auto mode = static_cast<mode_t>(st_mode);
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

void require_regular_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT) throw FileError(path, "does not exist");
    throw FileError(path, std::string("cannot be read: ") + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) throw FileError(path, std::string("is ") + non_regular_kind(st.st_mode) + ", not a regular file");
}

bool regular_file_exists(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 && errno == ENOENT) return false;
  require_regular_file(path);
  return true;
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  if (a.empty() || b.empty() || ::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

void refuse_output_over_inputs(const std::string& output, const std::string& option,
                               const std::vector<NamedInput>& inputs) {
  if (output.empty()) return;
  for (const auto& input : inputs)
    if (same_file(output, input.path))
      throw UsageError(option + " " + output + " is " + input.role +
                       (input.path == output ? "" : " (" + input.path + ")") +
                       " of this command; writing there would destroy it: choose another output path");
}

std::string printable(const std::string& text, std::size_t max_bytes) {
  std::string out;
  const bool cut = text.size() > max_bytes;
  out.reserve(std::min(text.size(), max_bytes) + 32);
  for (const unsigned char c : cut ? text.substr(0, max_bytes) : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (cut) out += "… (" + std::to_string(text.size()) + " bytes)";
  return out;
}

}  // namespace mumoe::io
