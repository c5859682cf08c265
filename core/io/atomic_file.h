// Atomic file replacement: write to a temporary file beside the destination, fsync, rename.
//
// Either the destination ends up with the complete new content or it is untouched; a failed or
// abandoned write never leaves a partial destination and removes its temporary file (also when a
// signal ends the program: io/output_files.h). A destination that exists and is not a regular
// file (a FIFO, a device, a directory) is refused, never replaced; the new file keeps the old
// one's permissions, or gets those the umask allows.
#pragma once

#include <cstddef>
#include <string>

#include "io/output_files.h"

namespace mumoe::io {

class AtomicFileWriter {
 public:
  /// Checks the destination (require_replaceable) and creates its TemporaryFile. Throws
  /// FileError / WriteError naming the destination.
  explicit AtomicFileWriter(std::string destination);
  ~AtomicFileWriter() = default;  ///< the temporary file is removed unless commit() succeeded
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  /// Appends bytes; throws WriteError (e.g. "No space left on device") naming the destination.
  void write(const void* data, std::size_t size);
  /// Flushes to disk and renames over the destination. Throws WriteError.
  void commit();

  const std::string& destination() const { return destination_; }
  const std::string& temporary_path() const { return temp_.path(); }

 private:
  std::string destination_;
  TemporaryFile temp_;
};

}  // namespace mumoe::io
