#include "io/output_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>

#include "io/errors.h"

namespace mumoe::io {
namespace {

std::string parent_directory(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string base_name(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// ---- The signal-cleanup registry --------------------------------------------------------------
// Fixed storage, so that the handler touches no allocator: a slot is free (0), being filled (1)
// or live (2); the handler unlinks the live ones. 64 temporaries at once is far more than any
// command holds (a writer's temporary, an export's staging file and its manifest).
constexpr int kSlots = 64;
struct Slot {
  std::atomic<int> state{0};
  char path[PATH_MAX];
};
std::array<Slot, kSlots> g_slots;

extern "C" void remove_temporaries_and_end(int signal_number) {
  for (auto& slot : g_slots)
    if (slot.state.load(std::memory_order_acquire) == 2) ::unlink(slot.path);
  // End as the signal would have: the default action, delivered once this handler returns (the
  // signal is blocked while it runs).
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
}

bool process_runs(long pid) {
  if (pid <= 0 || pid > INT_MAX) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

mode_t current_umask() {
  static const mode_t mask = [] {
    // /proc says it without changing it (umask() can only be read by setting it, which races
    // with other threads creating files).
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("Umask:", 0) == 0) return static_cast<mode_t>(std::strtoul(line.c_str() + 6, nullptr, 8));
    const mode_t m = ::umask(022);
    ::umask(m);
    return m;
  }();
  return mask;
}

}  // namespace

void require_replaceable(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;  // absent (or a dangling link: rename replaces it)
  if (!S_ISREG(st.st_mode))
    throw FileError(path, std::string("is ") + non_regular_kind(st.st_mode) +
                              ", not a regular file: mumoe writes only regular files; choose a file path");
}

void check_outputs(const std::vector<NamedOutput>& outputs, const std::vector<NamedInput>& inputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto& out = outputs[i];
    if (out.path.empty()) continue;
    require_replaceable(out.path);
    refuse_output_over_inputs(out.path, out.option, inputs);
    for (size_t j = 0; j < i; ++j) {
      const auto& other = outputs[j];
      if (other.path.empty()) continue;
      if (same_file(out.path, other.path) || out.path == other.path)
        throw UsageError(out.option + " " + out.path + " is also " + other.option +
                         (other.path == out.path ? "" : " (" + other.path + ")") +
                         "; one would overwrite the other: give each output its own path");
    }
    sweep_stale_temporaries(out.path);
  }
}

mode_t permissions_for(const std::string& destination) {
  struct stat st {};
  if (::stat(destination.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return st.st_mode & 07777;
  return 0666 & ~current_umask();
}

int register_temporary(const std::string& path) noexcept {
  if (path.size() >= PATH_MAX) return -1;
  for (int i = 0; i < kSlots; ++i) {
    int expected = 0;
    if (g_slots[i].state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
      std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
      g_slots[i].state.store(2, std::memory_order_release);
      return i;
    }
  }
  return -1;
}

void unregister_temporary(int token) noexcept {
  if (token >= 0 && token < kSlots) g_slots[token].state.store(0, std::memory_order_release);
}

TemporaryFile::TemporaryFile(const std::string& destination) {
  std::string name = destination + kTemporaryInfix + std::to_string(::getpid()) + "-XXXXXX";
  fd_ = ::mkstemp(name.data());
  if (fd_ < 0)
    throw WriteError(destination, "cannot create a temporary file in " + parent_directory(destination) + ": " +
                                      std::strerror(errno));
  path_ = name;
  slot_ = register_temporary(path_);
}

TemporaryFile::~TemporaryFile() {
  if (!done_) remove();
}

void TemporaryFile::close() {
  if (fd_ < 0) return;
  const int result = ::close(fd_);
  fd_ = -1;
  if (result != 0) throw WriteError(path_, std::string("close failed: ") + std::strerror(errno));
}

void TemporaryFile::remove() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!done_) ::unlink(path_.c_str());
  unregister_temporary(slot_);
  slot_ = -1;
  done_ = true;
}

void TemporaryFile::move_to(const std::string& destination) {
  close();
  move_into_place(path_, destination);
  unregister_temporary(slot_);
  slot_ = -1;
  done_ = true;
}

void move_into_place(const std::string& temporary, const std::string& destination) {
  // A link to an existing file: replace the file it points to, as writing to it would.
  std::string target = destination;
  struct stat link_status {};
  if (::lstat(destination.c_str(), &link_status) == 0 && S_ISLNK(link_status.st_mode)) {
    char resolved[PATH_MAX];
    if (::realpath(destination.c_str(), resolved) != nullptr) target = resolved;
  }
  require_replaceable(target);
  if (::chmod(temporary.c_str(), permissions_for(target)) != 0)
    throw WriteError(destination, std::string("cannot set the new file's permissions: ") + std::strerror(errno));
  if (::rename(temporary.c_str(), target.c_str()) != 0)
    throw WriteError(destination, std::string("cannot replace the file: ") + std::strerror(errno));
  // Make the rename itself durable.
  const int dir = ::open(parent_directory(target).c_str(), O_RDONLY | O_DIRECTORY);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

int sweep_stale_temporaries(const std::string& destination) noexcept {
  const std::string prefix = base_name(destination) + kTemporaryInfix;
  const std::string directory = parent_directory(destination);
  DIR* dir = ::opendir(directory.c_str());
  if (dir == nullptr) return 0;
  int removed = 0;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    // PID, a dash, then mkstemp's six characters (and a companion's suffix, if any).
    size_t end = prefix.size();
    while (end < name.size() && name[end] >= '0' && name[end] <= '9') ++end;
    if (end == prefix.size() || end - prefix.size() > 9 || end + 7 > name.size() || name[end] != '-') continue;
    const long pid = std::strtol(name.substr(prefix.size(), end - prefix.size()).c_str(), nullptr, 10);
    if (pid == ::getpid() || process_runs(pid)) continue;
    const std::string path = directory + "/" + name;
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::unlink(path.c_str()) == 0) ++removed;
  }
  ::closedir(dir);
  return removed;
}

void install_temporary_cleanup() {
  for (const int signal_number : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGALRM, SIGUSR1, SIGUSR2}) {
    struct sigaction current {};
    if (::sigaction(signal_number, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) continue;
    struct sigaction action {};
    action.sa_handler = remove_temporaries_and_end;
    sigemptyset(&action.sa_mask);
    ::sigaction(signal_number, &action, nullptr);
  }
}

}  // namespace mumoe::io
