// The one guard every file mumoe writes goes through, and the temporary files it writes first.
//
// A command checks all its outputs with check_outputs() before it reads or computes anything:
//   * an output that exists must be a regular file: a FIFO, a device (/dev/null), a directory or
//     a socket is refused, because mumoe replaces files by renaming a finished temporary over
//     them, which would replace the node itself (as root, the system's /dev/null);
//   * no output may be one of the command's inputs, and no two outputs may be the same file
//     (`--output X --edits-out X` would leave only the last one written);
//   * temporaries that an earlier run left beside an output when it was killed are removed.
//
// Files are then written to a TemporaryFile beside the destination — a unique name
// "DEST.mumoe-tmp-PID-XXXXXX", created exclusively (mkstemp), so it never replaces or consumes a
// file of the user's — and moved into place with move_into_place(), which gives the new file the
// old file's permissions (or, for a new file, those the umask allows). Every live temporary is
// removed when the program is stopped by a signal it can catch (install_temporary_cleanup());
// one left by SIGKILL is swept by the next run that writes beside it (its process is gone).
//
// Plain C++ (no LibTorch): the cache, the CLI and the GUI use it.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "io/file_checks.h"

namespace mumoe::io {

/// One output of a command: the path and what names it to the user ("--output", "--edits-out",
/// "--output's manifest").
struct NamedOutput {
  std::string path;
  std::string option;
};

/// Throws FileError for an output that exists and is not a regular file, UsageError for an output
/// that is one of `inputs` or the same file (or, when absent, the same path) as another output.
/// Empty paths are ignored. Sweeps stale temporaries beside each output (sweep_stale_temporaries).
void check_outputs(const std::vector<NamedOutput>& outputs, const std::vector<NamedInput>& inputs = {});

/// Throws FileError naming `path` when something exists there that is not a regular file (after
/// following symbolic links): the check every writer makes again just before it replaces a file.
void require_replaceable(const std::string& path);

/// The infix of every temporary file name: "DEST" + kTemporaryInfix + "PID-XXXXXX".
inline constexpr const char* kTemporaryInfix = ".mumoe-tmp-";

/// A uniquely named file beside a destination, created empty with mode 0600 and registered for
/// removal on a fatal signal. Removed by the destructor unless moved into place or released.
class TemporaryFile {
 public:
  /// Creates "DESTINATION.mumoe-tmp-PID-XXXXXX". Throws WriteError naming the destination.
  explicit TemporaryFile(const std::string& destination);
  ~TemporaryFile();
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;

  const std::string& path() const { return path_; }
  /// The open descriptor (read-write), or -1 once closed.
  int fd() const { return fd_; }
  /// Closes the descriptor (the file stays). Throws WriteError when close reports an error.
  void close();
  /// Closes and moves the file over `destination` (move_into_place); nothing is removed after.
  void move_to(const std::string& destination);
  /// Removes the file now (idempotent).
  void remove() noexcept;

 private:
  std::string path_;
  int fd_ = -1;
  int slot_ = -1;  ///< index in the signal-cleanup registry
  bool done_ = false;
};

/// Registers a path that is not a TemporaryFile (a companion such as a staging file's manifest)
/// for removal on a fatal signal; returns a token for unregister_temporary. Never throws: with
/// the registry full it returns -1 and the path is only swept by a later run.
int register_temporary(const std::string& path) noexcept;
void unregister_temporary(int token) noexcept;

/// Renames `temporary` over `destination` atomically after checking that the destination is
/// absent or a regular file; a symbolic link to a file has its target replaced, not the link. The
/// new file takes the permissions of the file it replaces, or 0666 less the umask. The directory
/// is synced so that the rename survives a crash. Throws WriteError naming the destination.
void move_into_place(const std::string& temporary, const std::string& destination);

/// The permissions a file written to `destination` gets: the existing file's, else 0666 & ~umask.
mode_t permissions_for(const std::string& destination);

/// Removes "DESTINATION.mumoe-tmp-PID-…" files (and their companions, which extend that name)
/// whose process PID no longer runs. Returns how many were removed. Never throws.
int sweep_stale_temporaries(const std::string& destination) noexcept;

/// Installs handlers that remove every registered temporary and then end the program as the
/// signal would have (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGALRM, SIGUSR1, SIGUSR2), for
/// each signal whose disposition is still the default (an ignored SIGHUP under nohup stays
/// ignored; a command's own SIGINT handler set later takes over, and its cancel path removes
/// temporaries by their destructors). Call once, early in main().
void install_temporary_cleanup();

}  // namespace mumoe::io
