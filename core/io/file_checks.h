// Checks every command makes on the paths it is given, before it reads or writes anything:
//   * an input must be a regular file (a FIFO would block the reader forever, a device or a
//     directory is never a model or data file);
//   * no output may be one of the command's own inputs (a mistyped --output must not turn the
//     user's model into a PNG), compared as files — through symbolic and hard links — not as
//     strings;
//   * names that come from files (tensor names, metadata) are printed escaped, so a hostile
//     file cannot send escape sequences to the user's terminal.
// Plain C++ (no LibTorch): the cache, the CLI and the GUI use it.
#pragma once

#include <string>
#include <vector>

namespace mumoe::io {

/// Throws FileError naming `path` unless it exists and is a regular file (after following
/// symbolic links): "does not exist", "is a directory, not a file", "is a FIFO (named pipe), not
/// a regular file", … Never opens the file, so it cannot block on a FIFO.
void require_regular_file(const std::string& path);

/// False when nothing is at `path`, true when a regular file is; throws FileError (as
/// require_regular_file) for anything else. For files a command creates when they are absent.
bool regular_file_exists(const std::string& path);

/// True when both paths name the same existing file (same device and inode: symbolic and hard
/// links resolved). False when either does not exist.
bool same_file(const std::string& a, const std::string& b);

/// One input of a command, for refuse_output_over_inputs: the path and what it is to the user
/// ("the model", "--input", "the analysis cache").
struct NamedInput {
  std::string path;
  std::string role;
};

/// Throws UsageError when `output` (given with option `option`, e.g. "--output") is the same
/// file as one of `inputs`; empty paths are ignored. The message names both paths and the role.
void refuse_output_over_inputs(const std::string& output, const std::string& option,
                               const std::vector<NamedInput>& inputs);

/// "a directory", "a FIFO (named pipe)", "a character device", … for a stat() mode (st_mode)
/// that is not a regular file: how the checks name what they refuse.
const char* non_regular_kind(unsigned int st_mode);

/// `text` with control characters (bytes < 0x20 and 0x7f, ESC included) written as \n, \t or
/// \xHH and backslashes doubled, so it is safe to print on a terminal. UTF-8 text passes unchanged.
/// Beyond `max_bytes` of the text it is cut with "… (N bytes)": a name from a hostile file (a
/// 100 MB tensor key) must not become a message of hundreds of megabytes.
std::string printable(const std::string& text, std::size_t max_bytes = 4096);

}  // namespace mumoe::io
