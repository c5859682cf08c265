#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "io/errors.h"

namespace mumoe::io {
namespace {

std::string parent_directory(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string errno_text(int err) { return std::strerror(err); }

}  // namespace

AtomicFileWriter::AtomicFileWriter(std::string destination) : destination_(std::move(destination)) {
  std::vector<char> templ(destination_.begin(), destination_.end());
  const char suffix[] = ".tmp-XXXXXX";
  templ.insert(templ.end(), suffix, suffix + sizeof(suffix));  // includes the terminating 0
  fd_ = ::mkstemp(templ.data());
  if (fd_ < 0)
    throw WriteError(destination_, "cannot create a temporary file in " +
                                       parent_directory(destination_) + ": " + errno_text(errno));
  temp_path_ = templ.data();
  ::fchmod(fd_, 0644);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (!committed_) discard();
}

void AtomicFileWriter::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_path_.empty()) ::unlink(temp_path_.c_str());
}

void AtomicFileWriter::write(const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd_, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw WriteError(destination_, "write failed: " + errno_text(errno));
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

void AtomicFileWriter::commit() {
  if (::fsync(fd_) != 0) throw WriteError(destination_, "fsync failed: " + errno_text(errno));
  if (::close(fd_) != 0) {
    fd_ = -1;
    throw WriteError(destination_, "close failed: " + errno_text(errno));
  }
  fd_ = -1;
  if (::rename(temp_path_.c_str(), destination_.c_str()) != 0)
    throw WriteError(destination_, "cannot replace the file: " + errno_text(errno));
  committed_ = true;
  // Make the rename itself durable.
  int dir = ::open(parent_directory(destination_).c_str(), O_RDONLY | O_DIRECTORY);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

}  // namespace mumoe::io
