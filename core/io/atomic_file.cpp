#include "io/atomic_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "io/errors.h"

namespace mumoe::io {
namespace {

// Checked before the temporary is made, so that a refused destination leaves nothing behind.
const std::string& checked(const std::string& destination) {
  require_replaceable(destination);
  return destination;
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(std::string destination)
    : destination_(std::move(destination)), temp_(checked(destination_)) {}

void AtomicFileWriter::write(const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(temp_.fd(), p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw WriteError(destination_, std::string("write failed: ") + std::strerror(errno));
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

void AtomicFileWriter::commit() {
  if (::fsync(temp_.fd()) != 0) throw WriteError(destination_, std::string("fsync failed: ") + std::strerror(errno));
  temp_.move_to(destination_);
}

}  // namespace mumoe::io
