// The OpenMP team for CPU work that splits into independent pieces without matrix products —
// a convolutional backbone's forward pass, decoding a batch of images — beside ATen's own team.
//
// LibTorch sizes ATen's team (OpenMP, also oneDNN's) at half the logical CPUs, its guess at the
// physical cores: one thread on this project's 2-vCPU VMs, whose vCPUs are whole cores (`lscpu`:
// one thread per core), so convolutions and decoding ran on one core while the other idled. Where
// the work is matrix products the cores are OpenBLAS's pool's (a team of two beside it made a head's
// forward pass 4× slower, the two pools' threads waiting in turn): so this is for the callers that
// measured faster, not a process-wide setting (docs/BENCHMARKS.md, "Convolutional backbones and
// decoding on every core", 2026-11-26).
#pragma once

namespace mumoe::nn {

/// One thread per physical core (io::physical_cores()) where that is more than the calling
/// thread's ATen team; 0 — leave the team as it is — otherwise, where the topology cannot be read,
/// and where the user set OMP_NUM_THREADS (which LibTorch follows). For io::OpenMpTeam. Also makes
/// ATen set the calling thread's team first (at::get_num_threads()), as io::OpenMpTeam needs.
int per_core_openmp_team();

}  // namespace mumoe::nn
