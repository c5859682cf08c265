// io::OpenMpTeam and io::SingleThreadedOpenMp (core/io/blas_threads.h): the calling thread's
// OpenMP team has the guard's size while it lives — what ATen's intra-op parallelism then uses —
// other threads keep theirs, and the previous size comes back at the end (nested guards
// included). io::physical_cores (core/io/cpu_cores.h) against made-up sysfs trees and against
// util-linux's lscpu; the team a convolutional backbone runs on (nn/image_classifier.h).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "io/blas_threads.h"
#include "io/cpu_cores.h"
#include "nn/image_classifier.h"
#include "temp_dir.h"

namespace thread_guards_test {

TEST(ThreadGuards, OneOpenMpThreadForTheCallingThreadOnlyAndRestored) {
  // ATen picks one thread on some 2-core machines (this project's, 2026-11-25): ask for two so
  // that the guard has something to change.
  const int saved = at::get_num_threads();
  at::set_num_threads(2);
  const int before = at::get_num_threads();
  ASSERT_EQ(before, 2);
  {
    const mumoe::io::SingleThreadedOpenMp guard;
    EXPECT_EQ(at::get_num_threads(), 1);
    int other = 0;
    std::thread([&] { other = at::get_num_threads(); }).join();
    EXPECT_EQ(other, before);
    {
      const mumoe::io::SingleThreadedOpenMp inner;
      EXPECT_EQ(at::get_num_threads(), 1);
    }
    EXPECT_EQ(at::get_num_threads(), 1);
    // Work still runs, on this thread alone.
    const auto x = torch::randn({300, 300});
    EXPECT_TRUE(torch::allclose(x.matmul(torch::eye(300)), x));
  }
  EXPECT_EQ(at::get_num_threads(), before);
  at::set_num_threads(saved);
}

TEST(ThreadGuards, AnOpenMpTeamOfThreeForTheCallingThreadOnlyAndRestored) {
  const int saved = at::get_num_threads();
  at::set_num_threads(1);
  {
    const mumoe::io::OpenMpTeam team(3);
    EXPECT_EQ(at::get_num_threads(), 3);
    int other = 0;
    std::thread([&] { other = at::get_num_threads(); }).join();
    EXPECT_EQ(other, 1);
    {
      const mumoe::io::OpenMpTeam none(0);  // no size: the team stays
      EXPECT_EQ(at::get_num_threads(), 3);
    }
  }
  EXPECT_EQ(at::get_num_threads(), 1);
  at::set_num_threads(saved);
}

namespace {

// A sysfs-like tree: cpuN/topology/{physical_package_id,core_id} for each (cpu, package, core).
void write_topology(const std::filesystem::path& root, const std::vector<std::vector<int>>& cpus) {
  for (const auto& c : cpus) {
    const auto dir = root / ("cpu" + std::to_string(c[0])) / "topology";
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "physical_package_id") << c[1] << "\n";
    std::ofstream(dir / "core_id") << c[2] << "\n";
  }
}

std::string command_output(const std::string& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  std::string out;
  if (!pipe) return out;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe.get())) > 0;) out.append(buffer, n);
  return out;
}

}  // namespace

TEST(CpuCores, HardwareThreadsOfOneCoreCountOnce) {
  mumoe::testkit::TempDir dir;
  const auto root = std::filesystem::path(dir.path());
  // cpu0 and cpu1 share core 0 of package 0; cpu2 is core 1; cpu3 is core 0 of package 1 (the
  // same core_id on another package is another core).
  write_topology(root, {{0, 0, 0}, {1, 0, 0}, {2, 0, 1}, {3, 1, 0}});
  EXPECT_EQ(mumoe::io::physical_cores_in(root.string(), {0, 1, 2, 3}), 3);
  EXPECT_EQ(mumoe::io::physical_cores_in(root.string(), {0, 1}), 1);
  EXPECT_EQ(mumoe::io::physical_cores_in(root.string(), {1, 3}), 2);
  // A CPU without topology files: cannot tell.
  EXPECT_EQ(mumoe::io::physical_cores_in(root.string(), {0, 5}), 0);
  std::ofstream(root / "cpu2" / "topology" / "core_id") << "garbage\n";
  EXPECT_EQ(mumoe::io::physical_cores_in(root.string(), {2}), 0);
}

TEST(CpuCores, ACgroupQuotaInWholeCpus) {
  EXPECT_EQ(mumoe::io::cpus_of_quota("200000 100000\n"), 2);
  EXPECT_EQ(mumoe::io::cpus_of_quota("150000 100000\n"), 2);  // 1.5 CPUs: rounded up
  EXPECT_EQ(mumoe::io::cpus_of_quota("50000 100000\n"), 1);
  EXPECT_EQ(mumoe::io::cpus_of_quota("max 100000\n"), 0);  // no quota
  EXPECT_EQ(mumoe::io::cpus_of_quota(""), 0);
  EXPECT_EQ(mumoe::io::cpus_of_quota("-1 100000"), 0);
}

TEST(CpuCores, ThisMachinesTopologyAsLscpuReadsIt) {
  // util-linux's own reading of the same topology: one line "cpu,core,socket" per online CPU.
  if (!std::filesystem::exists("/sys/devices/system/cpu/cpu0/topology/core_id"))
    GTEST_SKIP() << "this system shows no CPU topology in sysfs";
  const auto listing = command_output("lscpu -p=CPU,CORE,SOCKET 2>/dev/null");
  if (listing.empty()) GTEST_SKIP() << "lscpu (util-linux) is not installed";
  std::vector<int> cpus;
  std::set<std::pair<int, int>> cores;
  std::istringstream lines(listing);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    int cpu = 0, core = 0, socket = 0;
    if (std::sscanf(line.c_str(), "%d,%d,%d", &cpu, &core, &socket) != 3)
      GTEST_SKIP() << "lscpu cannot tell this CPU's core: " << line;
    cpus.push_back(cpu);
    cores.insert({socket, core});
  }
  ASSERT_FALSE(cpus.empty());
  EXPECT_EQ(mumoe::io::physical_cores_in("/sys/devices/system/cpu", cpus), static_cast<int>(cores.size()));
  // The process's own count: its CPUs' cores, at most the machine's.
  const int mine = mumoe::io::physical_cores();
  EXPECT_GE(mine, 1);
  EXPECT_LE(mine, static_cast<int>(cores.size()));
  EXPECT_LE(mine, static_cast<int>(std::thread::hardware_concurrency()));
}

TEST(BackboneTeam, ConvolutionalBackbonesOnTheCpuGetACorePerThreadUnlessTheTeamWasChosen) {
  if (std::getenv("OMP_NUM_THREADS") || std::getenv("MKL_NUM_THREADS"))
    GTEST_SKIP() << "OMP_NUM_THREADS or MKL_NUM_THREADS is set: the user's team is kept";
  const int saved = at::get_num_threads();
  const int cores = mumoe::io::physical_cores();
  const int ours = at::intraop_default_num_threads();  // LibTorch's own choice: nobody chose
  at::set_num_threads(ours);
  using mumoe::nn::BackboneKind;
  const int expected = cores > ours ? cores : 0;
  EXPECT_EQ(mumoe::nn::backbone_openmp_team(BackboneKind::SmallCnn, torch::kCPU), expected);
  EXPECT_EQ(mumoe::nn::backbone_openmp_team(BackboneKind::ResNet, torch::kCPU), expected);
  EXPECT_EQ(mumoe::nn::backbone_openmp_team(BackboneKind::VisionTransformer, torch::kCPU), 0);
  EXPECT_EQ(mumoe::nn::backbone_openmp_team(BackboneKind::TorchScript, torch::kCPU), 0);
  EXPECT_EQ(mumoe::nn::backbone_openmp_team(BackboneKind::SmallCnn, torch::Device(torch::kCUDA, 0)), 0);
  {
    // A team a guard chose on this thread (extraction's single-threaded stages) is kept.
    const mumoe::io::SingleThreadedOpenMp chosen;
    EXPECT_EQ(mumoe::nn::backbone_openmp_team(BackboneKind::SmallCnn, torch::kCPU), 0);
  }
  // So is one the program chose (at::set_num_threads to other than LibTorch's default).
  at::set_num_threads(cores + 1);
  EXPECT_EQ(mumoe::nn::backbone_openmp_team(BackboneKind::SmallCnn, torch::kCPU), 0);
  at::set_num_threads(ours);

  // The features on the larger team are the backbone's on one thread.
  torch::manual_seed(0);
  mumoe::nn::BackboneConfig b;  // the demo's CNN at 28 px
  mumoe::nn::LayerConfig head;
  head.input_dim = b.feature_dim;
  head.output_dim = 10;
  head.expert_dims = {16};
  head.cp_rank = 8;
  mumoe::nn::ImageClassifier classifier(b, head);
  classifier->eval();
  torch::NoGradGuard no_grad;
  const auto images = torch::rand({64, 1, 28, 28});
  const auto on_team = classifier->backbone_features(images);
  const auto on_one = classifier->backbone()->forward(images);
  EXPECT_TRUE(torch::allclose(on_team, on_one, 1e-5, 1e-6));
  EXPECT_EQ(at::get_num_threads(), ours);  // the team ended with the forward pass
  at::set_num_threads(saved);
}

}  // namespace thread_guards_test
