#include "io/blas_threads.h"

#include <dlfcn.h>

#include <mutex>

namespace mumoe::io {
namespace {

// OpenBLAS's own thread controls, looked up among the loaded libraries (LibTorch links BLAS
// through Debian's libblas.so.3 alternative, so OpenBLAS may or may not be the one loaded).
struct OpenBlasThreads {
  void (*set)(int) = nullptr;
  int (*get)() = nullptr;
};

constexpr int kOpenBlasPthreads = 1;  // openblas_get_parallel(): 0 sequential, 1 pthreads, 2 OpenMP

const OpenBlasThreads& openblas() {
  static const OpenBlasThreads found = [] {
    OpenBlasThreads t;
    t.set = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
    t.get = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
    // Only the pthreads build has a pool of its own: in the OpenMP build the call would set
    // OpenMP's thread count, which is ATen's too.
    const auto parallel = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_parallel"));
    if (!t.set || !t.get || !parallel || parallel() != kOpenBlasPthreads) t = {};
    return t;
  }();
  return found;
}

std::mutex guard_mutex;
int guards = 0;        // live guards, all threads
int saved_count = 1;   // OpenBLAS's thread count before the first of them

// OpenMP's per-thread team size (libgomp, loaded with LibTorch).
struct OpenMpThreads {
  void (*set)(int) = nullptr;
  int (*get)() = nullptr;
};

const OpenMpThreads& openmp() {
  static const OpenMpThreads found = [] {
    OpenMpThreads t;
    t.set = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
    t.get = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
    if (!t.set || !t.get) t = {};
    return t;
  }();
  return found;
}

}  // namespace

thread_local int teams_on_this_thread = 0;  // live OpenMpTeam guards that set a team

OpenMpTeam::OpenMpTeam(int threads) {
  if (threads < 1 || !openmp().set) return;
  saved_ = openmp().get();
  openmp().set(threads);
  ++teams_on_this_thread;
}

OpenMpTeam::~OpenMpTeam() {
  if (saved_ <= 0) return;
  openmp().set(saved_);
  --teams_on_this_thread;
}

bool OpenMpTeam::active_on_this_thread() { return teams_on_this_thread > 0; }

bool SingleThreadedBlas::available() { return openblas().set != nullptr; }

SingleThreadedBlas::SingleThreadedBlas() {
  if (!available()) return;
  std::lock_guard<std::mutex> lock(guard_mutex);
  if (guards++ == 0) {
    saved_count = openblas().get();
    openblas().set(1);
  }
}

SingleThreadedBlas::~SingleThreadedBlas() {
  if (!available()) return;
  std::lock_guard<std::mutex> lock(guard_mutex);
  if (--guards == 0) openblas().set(saved_count);
}

}  // namespace mumoe::io
