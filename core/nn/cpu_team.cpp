#include "nn/cpu_team.h"

#include <ATen/Parallel.h>

#include <cstdlib>

#include "io/blas_threads.h"
#include "io/cpu_cores.h"

namespace mumoe::nn {

int per_core_openmp_team() {
  static const int cores =
      std::getenv("OMP_NUM_THREADS") || std::getenv("MKL_NUM_THREADS") ? 0 : io::physical_cores();
  const int team = at::get_num_threads();  // first: ATen's per-thread initialisation
  if (cores <= team || io::OpenMpTeam::active_on_this_thread() || team != at::intraop_default_num_threads())
    return 0;
  return cores;
}

AtenTeam::AtenTeam(int threads) : initialised_(at::get_num_threads()), team_(threads) {}

}  // namespace mumoe::nn
