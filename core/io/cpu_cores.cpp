#include "io/cpu_cores.h"

#include <sched.h>

#include <fstream>
#include <set>
#include <sstream>
#include <utility>

namespace mumoe::io {
namespace {

bool read_number(const std::string& path, long& value) {
  std::ifstream in(path);
  return static_cast<bool>(in >> value);
}

std::vector<int> cpus_in_affinity_mask() {
  std::vector<int> cpus;
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof(mask), &mask) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &mask)) cpus.push_back(cpu);
  return cpus;
}

// The process's cgroup v2 quota in whole CPUs, 0 when there is none (or no cgroup v2): the
// smallest of its cgroup's and every parent's cpu.max, as the kernel enforces each of them. In a
// container without a cgroup namespace of its own the path names the host's hierarchy, absent
// here: then the container's root file is all there is to read.
int cgroup_quota_cpus() {
  std::ifstream cgroup("/proc/self/cgroup");
  std::string line;
  while (std::getline(cgroup, line)) {
    if (line.rfind("0::", 0) != 0) continue;  // the v2 hierarchy's line: "0::/path"
    int smallest = 0;
    const auto take = [&](const std::string& dir) {
      std::ifstream file("/sys/fs/cgroup" + dir + "/cpu.max");
      if (!file) return;
      std::stringstream contents;
      contents << file.rdbuf();
      const int cpus = cpus_of_quota(contents.str());
      if (cpus > 0 && (smallest == 0 || cpus < smallest)) smallest = cpus;
    };
    for (std::string dir = line.substr(3); dir.size() > 1 && dir[0] == '/'; dir.resize(dir.rfind('/'))) take(dir);
    take("");
    return smallest;
  }
  return 0;
}

}  // namespace

int cpus_of_quota(const std::string& cpu_max) {
  std::istringstream in(cpu_max);
  long quota = 0, period = 0;
  if (!(in >> quota >> period) || quota <= 0 || period <= 0) return 0;  // "max …" reads as no number
  return static_cast<int>((quota + period - 1) / period);
}

int physical_cores_in(const std::string& cpu_dir, const std::vector<int>& cpus) {
  std::set<std::pair<long, long>> cores;
  for (const int cpu : cpus) {
    const auto topology = cpu_dir + "/cpu" + std::to_string(cpu) + "/topology/";
    long package = 0, core = 0;
    if (!read_number(topology + "physical_package_id", package) || !read_number(topology + "core_id", core)) return 0;
    cores.insert({package, core});
  }
  return static_cast<int>(cores.size());
}

int physical_cores() {
  static const int count = [] {
    int cores = physical_cores_in("/sys/devices/system/cpu", cpus_in_affinity_mask());
    const int quota = cgroup_quota_cpus();
    if (cores > 0 && quota > 0 && quota < cores) cores = quota;
    return cores;
  }();
  return count;
}

}  // namespace mumoe::io
