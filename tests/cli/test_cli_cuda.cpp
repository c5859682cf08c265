// `--device cuda` end to end: forward, evaluate, train and ablate on the GPU give what the CPU
// gives — ablation's per-class accuracies exactly, against the expert's factor rows literally
// zeroed and the layer run on the CPU (an independent computation, not the analysis library).
// Where the machine has no CUDA (CI) only the refusal runs; scripts/gpu-check.sh runs the rest
// on a GPU machine. MUMOE_TEST_CUDA_STAND_IN=cpu runs them with --device cpu in cuda's place: a
// check of the tests themselves, never a substitute for the GPU run.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "analysis_fixture.h"
#include "cli_runner.h"
#include "io/safetensors.h"
#include "temp_dir.h"

using namespace mumoe;

namespace {

bool cpu_stands_in_for_the_gpu() {
  const char* stand_in = std::getenv("MUMOE_TEST_CUDA_STAND_IN");
  return !torch::cuda::is_available() && stand_in && std::string(stand_in) == "cpu";
}

// The --device value for the GPU ("cuda"; "cpu" when the CPU stands in).
std::string gpu() { return cpu_stands_in_for_the_gpu() ? "cpu" : "cuda"; }

#define REQUIRE_GPU()                                                       \
  if (!torch::cuda::is_available() && !cpu_stands_in_for_the_gpu()) \
  GTEST_SKIP() << "no CUDA device on this machine"

void expect_same_accuracies(const nlohmann::json& got, const std::vector<double>& want) {
  const auto values = got.get<std::vector<double>>();
  ASSERT_EQ(values.size(), want.size());
  for (size_t c = 0; c < want.size(); ++c) EXPECT_NEAR(values[c], want[c], 1e-12) << "class " << c;
}

}  // namespace

class CliCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    fixture_ = testkit::write_analysis_fixture(dir_.path().string(),
                                               testkit::head_config(nn::Factorization::CP, {12}, 4), 400, 33);
  }

  nlohmann::json cuda_json(const std::string& args) {
    const auto run = testkit::run_cli(args);
    EXPECT_EQ(run.code, 0) << "mumoe " << args << "\n" << run.out;
    return nlohmann::json::parse(run.out.substr(std::min(run.out.find('{'), run.out.size())));
  }

  std::string analysis_args(const std::string& cache) const {
    return fixture_.model_path + " --data features:" + fixture_.features_path + " --cache " + dir_.file(cache) +
           " --chunk-size 64 --quiet --json ";
  }

  // Per-class accuracy of the head with expert rows `experts` of factors.0 zeroed, on the CPU.
  std::vector<double> zeroed_rows_accuracy(const std::vector<int64_t>& experts) const {
    return testkit::zeroed_rows_accuracy(fixture_, experts);
  }

  testkit::TempDir dir_;
  testkit::AnalysisFixture fixture_;
};

TEST_F(CliCuda, ADeviceTheMachineLacksIsAUsageErrorNamingIt) {
  const auto input = dir_.file("in.safetensors");
  io::write_safetensors(input, {{"input", torch::randn({3, 12})}});
  const std::string asked = torch::cuda::is_available() ? "cuda:" + std::to_string(torch::cuda::device_count()) : "cuda";
  const auto run = testkit::run_cli("forward " + fixture_.model_path + " --input " + input + " --output " +
                                    dir_.file("out.safetensors") + " --device " + asked);
  EXPECT_EQ(run.code, 1) << run.out;
  EXPECT_NE(run.out.find("--device " + asked), std::string::npos) << run.out;
  EXPECT_FALSE(std::filesystem::exists(dir_.file("out.safetensors")));
}

TEST_F(CliCuda, ForwardAndEvaluateOnTheGpuAgreeWithTheCpu) {
  REQUIRE_GPU();
  const auto input = dir_.file("in.safetensors");
  io::write_safetensors(input, {{"input", io::SafetensorsFile::open(fixture_.features_path).read("features")}});
  const auto cpu_out = dir_.file("cpu.safetensors"), gpu_out = dir_.file("gpu.safetensors");
  for (const auto& [device, output] : {std::pair{std::string("cpu"), cpu_out}, std::pair{gpu(), gpu_out}})
    EXPECT_EQ(cuda_json("forward " + fixture_.model_path + " --input " + input + " --ablate 3 --output " + output +
                        " --device " + device + " --json")["device"],
              device);  // the command says where it ran
  const auto on_cpu = io::SafetensorsFile::open(cpu_out).read("output");
  const auto on_gpu = io::SafetensorsFile::open(gpu_out).read("output");
  EXPECT_TRUE(torch::allclose(on_gpu, on_cpu, 1e-4, 1e-5)) << (on_gpu - on_cpu).abs().max();

  const auto data = " --data features:" + fixture_.features_path + " --json";
  const auto evaluated_on_cpu = cuda_json("evaluate " + fixture_.model_path + data);
  const auto evaluated_on_gpu = cuda_json("evaluate " + fixture_.model_path + data + " --device " + gpu());
  EXPECT_EQ(evaluated_on_gpu["samples"], evaluated_on_cpu["samples"]);
  EXPECT_NEAR(evaluated_on_gpu["accuracy"].get<double>(), evaluated_on_cpu["accuracy"].get<double>(),
              1.0 / 400 + 1e-12);  // a float32 tie at most
}

TEST_F(CliCuda, AblationOnTheGpuEqualsZeroedFactorRowsOnTheCpu) {
  REQUIRE_GPU();
  const auto set = cuda_json("ablate " + analysis_args("gpu.sqlite") + "--experts 2,7 --device " + gpu());
  expect_same_accuracies(set["per_class_accuracy_before"], zeroed_rows_accuracy({}));
  expect_same_accuracies(set["experts"][0]["per_class_accuracy_after"], zeroed_rows_accuracy({2, 7}));
  const auto sweep = cuda_json("ablate " + analysis_args("gpu.sqlite") + "--all --device " + gpu());
  ASSERT_EQ(sweep["experts"].size(), 12u);
  for (int64_t n = 0; n < 12; ++n) {
    SCOPED_TRACE("expert " + std::to_string(n));
    expect_same_accuracies(sweep["experts"][n]["per_class_accuracy_after"], zeroed_rows_accuracy({n}));
  }
}

// The same seed trains the same head on either device (float32, so up to rounding), and the file
// written from the GPU holds what was trained: the CPU evaluates it as the run recorded.
TEST_F(CliCuda, TrainingOnTheGpuGivesTheCpusModel) {
  REQUIRE_GPU();
  const auto features = "features:" + fixture_.features_path;
  const auto train = [&](const std::string& device, const std::string& output) {
    cuda_json("train --data " + features + " --test-data " + features + " --output " + output +
              " --experts 8 --rank 4 --epochs 3 --batch-size 32 --lr 1e-2 --seed 3 --quiet --json --device " + device);
    return model::ModelFile::load(output);
  };
  const auto on_cpu = train("cpu", dir_.file("cpu.safetensors"));
  const auto on_gpu = train(gpu(), dir_.file("gpu.safetensors"));
  auto cpu_layer = on_cpu.build_layer("head");
  auto gpu_layer = on_gpu.build_layer("head");
  auto gpu_parameters = gpu_layer->named_parameters();
  for (const auto& p : cpu_layer->named_parameters()) {
    SCOPED_TRACE(p.key());
    EXPECT_TRUE(torch::allclose(gpu_parameters[p.key()], p.value(), 1e-3, 1e-4))
        << (gpu_parameters[p.key()] - p.value()).abs().max();
  }
  const auto again = cuda_json("evaluate " + dir_.file("gpu.safetensors") + " --data " + features + " --json");
  EXPECT_EQ(on_gpu.manifest().provenance["device"], gpu());  // the file records where it was trained
  const auto recorded = on_gpu.manifest().provenance["test_metrics"]["accuracy"].get<double>();
  EXPECT_NEAR(again["accuracy"].get<double>(), recorded, 1.0 / 400 + 1e-12);  // a float32 tie at most
}
