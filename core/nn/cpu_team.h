// How many threads CPU work gets that splits into independent pieces without matrix products: a
// convolutional backbone's forward pass (ATen's OpenMP team, also oneDNN's), the decoding of a
// batch of images (threads of its own, data/image_stream.h).
//
// LibTorch sizes ATen's team at half the logical CPUs, its guess at the physical cores: one
// thread on this project's 2-vCPU VMs, whose vCPUs are whole cores (`lscpu`: one thread per
// core), so convolutions and decoding ran on one core while the other idled. Where the work is
// matrix products the cores are OpenBLAS's pool's (a team of two beside it made a softmax head's
// forward pass 4× slower, the two pools' threads waiting in turn): so this is for the callers
// that measured faster, not a process-wide setting (docs/BENCHMARKS.md, "Convolutional backbones
// and decoding on every core", 2026-11-26).
#pragma once

#include "io/blas_threads.h"

namespace mumoe::nn {

/// One thread per physical core (io::physical_cores()) where that is more than the calling
/// thread's ATen team; 0 — leave the team as it is — otherwise, where the topology cannot be read,
/// and where the team was chosen: OMP_NUM_THREADS or MKL_NUM_THREADS set (LibTorch follows them),
/// an io::OpenMpTeam guard living on this thread, or at::set_num_threads to other than LibTorch's
/// default (a choice equal to the default cannot be told from it). For io::OpenMpTeam. Also
/// makes ATen set the calling thread's team first (at::get_num_threads()), as the guard needs.
int per_core_openmp_team();

/// io::OpenMpTeam for a thread that runs ATen: its per-thread initialisation first (which would
/// otherwise set the team again on the thread's first parallel op), then `threads` (0: unchanged)
/// until the guard ends.
class AtenTeam {
 public:
  explicit AtenTeam(int threads);

 private:
  int initialised_;     ///< at::get_num_threads(), called before the team is set
  io::OpenMpTeam team_;
};

}  // namespace mumoe::nn
