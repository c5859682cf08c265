#include "nn/cpu_team.h"

#include <ATen/Parallel.h>

#include <cstdlib>

#include "io/cpu_cores.h"

namespace mumoe::nn {

int per_core_openmp_team() {
  static const int cores = std::getenv("OMP_NUM_THREADS") ? 0 : io::physical_cores();
  return cores > at::get_num_threads() ? cores : 0;
}

}  // namespace mumoe::nn
