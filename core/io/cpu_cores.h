// How many physical cores this process may compute on, for sizing a thread team.
//
// LibTorch sizes ATen's OpenMP team at half the logical CPUs (c10's defaultNumThreads guesses two
// hardware threads per core). On a virtual machine whose vCPUs are whole cores — this project's
// 2-vCPU VMs, where `lscpu` says one thread per core — that is half the machine: one thread, and
// a CNN's convolutions ran on one core while the other waited (docs/BENCHMARKS.md, "Convolutional
// backbones and decoding on every core"). The topology says what the guess cannot: CPUs that share
// a core count once. Plain C++, no LibTorch (Linux sysfs and procfs; elsewhere it cannot tell).
#pragma once

#include <string>
#include <vector>

namespace mumoe::io {

/// The physical cores among the CPUs in the affinity mask of the thread that first asks (sysfs
/// topology: CPUs with the same physical_package_id and core_id are one core), at most the CPUs
/// a cgroup v2 quota (cpu.max, the process's cgroup's and its parents') grants, rounded up. A
/// cgroup v1 quota is not read. 0 when the topology cannot be read. Computed once.
int physical_cores();

/// The same count for the CPUs `cpus` of a sysfs-like tree: `cpu_dir`/cpuN/topology/
/// {physical_package_id,core_id}. 0 when a CPU's files are missing or unreadable. For tests.
int physical_cores_in(const std::string& cpu_dir, const std::vector<int>& cpus);

/// The whole CPUs a cgroup v2 `cpu.max` file's contents grant ("200000 100000" → 2, "150000
/// 100000" → 2, "max 100000" → 0 = no quota); 0 for anything else.
int cpus_of_quota(const std::string& cpu_max);

}  // namespace mumoe::io
