// Issue 45: the same answer on any machine. A softmax-gated CP head (every expert active: the
// dense-gate path, whose coefficients the cache leaves to the model and recomputes on load) is
// analysed under OpenBLAS's kernels and thread counts one after another, each into a fresh cache,
// and its cache read back under the other settings: every setting answers, and the answers agree
// (to the last bits that other kernels round differently).
// The head is large enough that OpenBLAS splits its products between threads (256 inputs, 256
// experts, rank 64, 10,000 samples: the size that failed on an AMD EPYC with Haswell kernels and
// two threads).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "analysis_fixture.h"
#include "cli_runner.h"
#include "io/blas_kernels.h"
#include "temp_dir.h"

using namespace mumoe;

namespace {

// The answer without what differs between runs by design (timings, the cache's path).
nlohmann::json answer_of(const testkit::CliRun& run) {
  const auto brace = run.out.find('{');
  if (brace == std::string::npos) return nullptr;
  auto j = nlohmann::json::parse(run.out.substr(brace));
  std::function<void(nlohmann::json&)> strip = [&](nlohmann::json& v) {
    if (v.is_object()) {
      for (const auto* key : {"seconds", "cache", "extraction_seconds", "load_seconds", "elapsed_seconds"}) v.erase(key);
      for (auto& [k, child] : v.items()) strip(child);
    } else if (v.is_array()) {
      for (auto& child : v) strip(child);
    }
  };
  strip(j);
  return j;
}

// "" when `a` and `b` agree: the same structure, integers, strings and booleans equal, floating
// values within a relative 1e-5 (other kernels round the gates' products differently in their last
// bits; thread counts within one kernel give the same bits); else the path of the first difference.
std::string disagreement(const nlohmann::json& a, const nlohmann::json& b, const std::string& path = "") {
  if (a.is_number_float() || b.is_number_float()) {
    if (!a.is_number() || !b.is_number()) return path + " (types)";
    const double x = a.get<double>(), y = b.get<double>();
    return std::abs(x - y) <= 1e-5 * std::max({1e-4, std::abs(x), std::abs(y)})
               ? ""
               : path + ": " + std::to_string(x) + " vs " + std::to_string(y);
  }
  if (a.type() != b.type() || a.size() != b.size()) return path + " (type or size)";
  if (a.is_object()) {
    for (auto it = a.begin(); it != a.end(); ++it) {
      if (!b.contains(it.key())) return path + "/" + it.key() + " (missing)";
      if (auto d = disagreement(it.value(), b.at(it.key()), path + "/" + it.key()); !d.empty()) return d;
    }
    return "";
  }
  if (a.is_array()) {
    for (size_t i = 0; i < a.size(); ++i)
      if (auto d = disagreement(a[i], b[i], path + "/" + std::to_string(i)); !d.empty()) return d;
    return "";
  }
  return a == b ? "" : path + ": " + a.dump() + " vs " + b.dump();
}

TEST(BlasMatrix, ASoftmaxHeadAnswersTheSameUnderEveryKernelAndThreadCount) {
  const auto cpu = io::this_cpu();
  if (!cpu.avx2 || !cpu.fma) GTEST_SKIP() << "the CPU runs neither OpenBLAS's Haswell nor SkylakeX kernels";
  testkit::TempDir dir;
  auto config = testkit::head_config(nn::Factorization::CP, {256}, 10);
  config.input_dim = 256;
  config.cp_rank = 64;
  config.gate_activation = nn::GateActivationKind::Softmax;
  const auto fixture = testkit::write_analysis_fixture(dir.path().string(), config, 10000, 45);

  std::vector<std::string> kernels = {"", "Haswell"};  // "": unset, mumoe's own choice
  if (cpu.avx512f && cpu.avx512cd && cpu.avx512bw && cpu.avx512dq && cpu.avx512vl) kernels.push_back("SkylakeX");
  struct Setting {
    std::string env, name;
  };
  std::vector<Setting> settings;
  for (const auto& k : kernels)
    for (const int threads : {1, 2, 4})
      settings.push_back({(k.empty() ? std::string("env -u OPENBLAS_CORETYPE") : "env OPENBLAS_CORETYPE=" + k) +
                              " OPENBLAS_NUM_THREADS=" + std::to_string(threads) + " ",
                          (k.empty() ? std::string("default kernels") : k) + ", " + std::to_string(threads) +
                              " threads"});

  const auto analysis = [&](const Setting& s, const std::string& command, const std::string& cache) {
    return testkit::run_shell(s.env + MUMOE_CLI_PATH + " " + command + " " + fixture.model_path + " --data features:" +
                              fixture.features_path + " --cache " + cache + " --quiet --json");
  };
  nlohmann::json reference;
  for (size_t i = 0; i < settings.size(); ++i) {
    const auto& s = settings[i];
    const auto cache = dir.file("cache-" + std::to_string(i) + ".sqlite");
    const auto analyze = analysis(s, "analyze", cache);
    ASSERT_EQ(analyze.code, 0) << s.name << ": " << analyze.out;
    // A second command reads the run back: the dense gate's coefficients are recomputed here.
    const auto stats = analysis(s, "stats", cache);
    ASSERT_EQ(stats.code, 0) << s.name << ": " << stats.out;
    const auto answer = answer_of(stats);
    if (reference.is_null()) reference = answer;
    EXPECT_EQ(disagreement(reference, answer), "") << s.name;
  }
  // Each cache read under every other setting (a cache carried to another machine).
  for (size_t i = 0; i < settings.size(); i += 2) {
    const auto& reader = settings[(i + 3) % settings.size()];
    const auto stats = analysis(reader, "stats", dir.file("cache-" + std::to_string(i) + ".sqlite"));
    ASSERT_EQ(stats.code, 0) << settings[i].name << " read under " << reader.name << ": " << stats.out;
    const auto answer = answer_of(stats);
    EXPECT_EQ(disagreement(reference, answer), "") << settings[i].name << " read under " << reader.name;
  }
}

}  // namespace
