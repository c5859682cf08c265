// Atomic file replacement: write to a temporary file beside the destination, fsync, rename.
//
// Either the destination ends up with the complete new content or it is untouched; a failed or
// abandoned write never leaves a partial destination and removes its temporary file.
#pragma once

#include <cstddef>
#include <string>

namespace mumoe::io {

class AtomicFileWriter {
 public:
  /// Creates "DEST.tmp-XXXXXX" in the destination's directory. Throws WriteError.
  explicit AtomicFileWriter(std::string destination);
  ~AtomicFileWriter();  ///< removes the temporary file unless commit() succeeded
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  /// Appends bytes; throws WriteError (e.g. "No space left on device") naming the destination.
  void write(const void* data, std::size_t size);
  /// Flushes to disk and renames over the destination. Throws WriteError.
  void commit();

  const std::string& destination() const { return destination_; }
  const std::string& temporary_path() const { return temp_path_; }

 private:
  void discard() noexcept;

  std::string destination_;
  std::string temp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace mumoe::io
