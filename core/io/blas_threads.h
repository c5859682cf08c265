// Scoped single-threaded BLAS, for code that issues many small matrix products, and a scoped
// OpenMP team size for one thread (below).
//
// OpenBLAS (Debian's libopenblas0-pthread, which LibTorch calls for CPU matrix products) splits
// every product above about 2.6e5 multiply-adds across its own threads, beside ATen's OpenMP
// threads. On a few cores the two pools take turns (sched_yield), and for products of a few
// million multiply-adds the hand-over costs more than the arithmetic: the ten context products
// of a rank-one ablation sweep ([1024 × 129] · [129 × 64], float64) took 11–17 ms with OpenBLAS's
// threads and 8.4–9 ms without (2 cores, 2026-11-24). Large products (a CNN's forward) still gain
// from the threads (5.5 s vs 8.7 s for 10,000 images), so this is scoped to the code that
// measured faster.
//
// OpenBLAS's thread count is process-wide: while a guard lives, every thread's BLAS calls run
// single-threaded (guards nest and may overlap across threads; the last one out restores the
// count). Without OpenBLAS's pthreads build (MKL, another BLAS, OpenBLAS built on OpenMP, whose
// thread count is ATen's too) it does nothing. Plain C++, no LibTorch.
#pragma once

namespace mumoe::io {

class SingleThreadedBlas {
 public:
  SingleThreadedBlas();
  ~SingleThreadedBlas();
  SingleThreadedBlas(const SingleThreadedBlas&) = delete;
  SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;

  /// True when the process's BLAS is OpenBLAS (found at run time), i.e. the guard has an effect.
  static bool available();
};

/// Scoped OpenMP team size for the calling thread only: its parallel regions (ATen's intra-op
/// parallelism, oneDNN's convolutions) run on `threads` threads until the guard ends; other
/// threads keep their teams. Does nothing for `threads` < 1 or without OpenMP (looked up at run
/// time). ATen sets each thread's team size on its first parallel op (to at::set_num_threads's
/// value, or its default): call at::get_num_threads() before the guard so that this happens first
/// (nn::AtenTeam, core/nn/cpu_team.h, does both).
class OpenMpTeam {
 public:
  explicit OpenMpTeam(int threads);
  ~OpenMpTeam();
  OpenMpTeam(const OpenMpTeam&) = delete;
  OpenMpTeam& operator=(const OpenMpTeam&) = delete;

  /// Whether a guard that set a team lives on the calling thread: code that would size a team
  /// itself (nn/cpu_team.h) leaves a chosen one alone.
  static bool active_on_this_thread();

 private:
  int saved_ = 0;  ///< the thread's team size before, 0 when nothing was changed
};

/// A team of one: for work that leaves the other cores to a thread of its own (extraction's
/// writer, chunked_run.h): on 2 cores a team of two loses more to waiting for the thread the
/// writer displaced than it gains.
class SingleThreadedOpenMp : public OpenMpTeam {
 public:
  SingleThreadedOpenMp() : OpenMpTeam(1) {}
};

}  // namespace mumoe::io
