// The `mumoe` command-line contract: JSON output, the forward files, and the exit codes
// (0 success, 1 usage error, 2 unreadable or invalid input) — never a crash.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>


#include "io/safetensors.h"
#include "model/model_file.h"
#include "cli_runner.h"
#include "temp_dir.h"

using namespace mumoe;
using mumoe::testkit::TempDir;

namespace {

testkit::CliRun mumoe_cli(const std::string& args) {
  auto run = testkit::run_cli(args);
  EXPECT_FALSE(run.killed) << "mumoe " << args << " was killed by a signal:\n" << run.out;
  return run;
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = dir_.file("m.safetensors");
    auto r = mumoe_cli("init --output " + model_ + " --input-dim 6 --output-dim 4 --experts 8,3 --rank 5 --labels a,b,c,d --seed 4");
    ASSERT_EQ(r.code, 0) << r.out;
    // Give the gating real weights so the coefficients are not uniform.
    auto file = model::ModelFile::load(model_);
    auto block = file.build_layer("mumoe");
    {
      torch::NoGradGuard g;
      for (auto& p : block->named_parameters())
        if (p.key().rfind("projs", 0) == 0) p.value().normal_();
    }
    model::save_model_file(model_, file.manifest(), model::layer_tensors(file.single_layer(), block));
  }
  TempDir dir_;
  std::string model_;
};

// --version names the BLAS kernels (io/blas_kernels.h), and a kernel the user set is the one run.
TEST(CliVersion, NamesTheBlasKernelsAndKeepsTheUsersChoice) {
  const auto plain = testkit::run_cli("--version");
  ASSERT_EQ(plain.code, 0) << plain.out;
  EXPECT_EQ(plain.out.rfind(MUMOE_VERSION_TEXT "\n", 0), 0u) << plain.out;  // scripts read the first line
  const auto chosen = testkit::run_shell("OPENBLAS_CORETYPE=Haswell " + std::string(MUMOE_CLI_PATH) + " --version");
  ASSERT_EQ(chosen.code, 0) << chosen.out;
  if (plain.out.find("OpenBLAS kernels: ") == std::string::npos) GTEST_SKIP() << "not OpenBLAS: " << plain.out;
  EXPECT_NE(chosen.out.find("OpenBLAS kernels: Haswell (OPENBLAS_CORETYPE=Haswell)"), std::string::npos) << chosen.out;
}

// The runner (tests/support/cli_runner.h) runs in this process only the lines a shell would split
// into plain words, and such a run answers as the program does.
TEST(CliRunner, RunsInProcessOnlyWhatNeedsNoShell) {
  using Words = std::vector<std::string>;
  EXPECT_EQ(testkit::simple_shell_words("info 'a b'  \"c \\\"d\" e\\ f ''"), (Words{"info", "a b", "c \"d", "e f", ""}));
  EXPECT_EQ(testkit::simple_shell_words("gallery M --subpop 'long=1&frame=0'"), (Words{"gallery", "M", "--subpop", "long=1&frame=0"}));
  for (const char* shell : {"info M > out", "info M 2>&1", "A=1 info M", "info $HOME", "info \"$HOME\"", "info `x`",
                            "info M | head", "info M; ls", "info *.safetensors", "info 'unterminated", "info \"open"})
    EXPECT_FALSE(testkit::simple_shell_words(shell)) << shell;
  // A run's signal dispositions are its own: the program ignores SIGXFSZ (a write past `ulimit -f`
  // then fails with EFBIG), and an ignored signal would reach every program started afterwards.
  struct sigaction before {}, after {};
  ::sigaction(SIGXFSZ, nullptr, &before);
  ASSERT_EQ(testkit::run_cli("--version").code, 0);
  ::sigaction(SIGXFSZ, nullptr, &after);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
  EXPECT_NE(after.sa_handler, SIG_IGN);
}

TEST_F(Cli, InfoJsonDescribesTheModel) {
  auto r = mumoe_cli("info " + model_ + " --json");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["layers"].size(), 1u);
  const auto& layer = j["layers"][0];
  EXPECT_EQ(layer["variant"], "CP");
  EXPECT_EQ(layer["total_experts"], 24);
  EXPECT_EQ(layer["experts_per_mode"], (std::vector<int>{8, 3}));
  // §3: R(N1 + N2 + I + 1 + O) + I(N1 + N2) = 5·(8+3+7+4) + 6·11
  EXPECT_EQ(layer["parameters"]["total"], 5 * (8 + 3 + 7 + 4) + 6 * 11);
  EXPECT_EQ(j["label_names"], (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(j["kind"], "multi-class");  // which pages the GUI shows for it
  auto text = mumoe_cli("info " + model_);
  EXPECT_EQ(text.code, 0);
  EXPECT_NE(text.out.find("8 × 3 = 24"), std::string::npos) << text.out;
  // The program itself, in a process of its own, prints the same text, JSON and errors.
  const std::string program = std::string(MUMOE_CLI_PATH) + " ";
  EXPECT_EQ(testkit::run_shell(program + "info " + model_).out, text.out);
  EXPECT_EQ(testkit::run_shell(program + "info " + model_ + " --json").out, r.out);
  const auto missing = mumoe_cli("info " + dir_.file("missing.safetensors"));
  const auto missing_process = testkit::run_shell(program + "info " + dir_.file("missing.safetensors"));
  EXPECT_EQ(missing.code, missing_process.code);
  EXPECT_EQ(missing.out, missing_process.out);
}

TEST_F(Cli, ForwardWritesOutputsAndCoefficientsThatMatchTheLibrary) {
  const auto in = dir_.file("in.safetensors"), out = dir_.file("out.safetensors");
  auto x = torch::randn({3, 5, 6});
  io::write_safetensors(in, {{"input", x}});
  auto r = mumoe_cli("forward " + model_ + " --input " + in + " --output " + out + " --ablate 2,5,1:0 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["output_shape"], (std::vector<int>{3, 5, 4}));

  auto block = model::ModelFile::load(model_).build_layer("mumoe");
  torch::NoGradGuard g;
  nn::ExpertAblation ablation{{{2, 5}, {0}}};
  auto expected = block->forward(x, ablation);
  auto f = io::SafetensorsFile::open(out);
  EXPECT_TRUE(torch::allclose(f.read("output"), expected.output, 1e-6, 1e-6));
  EXPECT_TRUE(torch::equal(f.read("coefficients.0"), expected.coefficients[0]));
  EXPECT_TRUE(torch::equal(f.read("coefficients.1"), expected.coefficients[1]));
  EXPECT_EQ(f.read("coefficients.0").select(-1, 5).abs().sum().item<float>(), 0.0f);
}

TEST_F(Cli, ForwardRunsInFloat64ForFloat64Input) {
  const auto in = dir_.file("in.safetensors"), out = dir_.file("out.safetensors");
  io::write_safetensors(in, {{"input", torch::randn({4, 6}, torch::kFloat64)}});
  ASSERT_EQ(mumoe_cli("forward " + model_ + " --input " + in + " --output " + out).code, 0);
  EXPECT_EQ(io::SafetensorsFile::open(out).entry("output").dtype, "F64");
}

TEST_F(Cli, UsageErrorsExitWithOne) {
  const auto in = dir_.file("in.safetensors");
  io::write_safetensors(in, {{"input", torch::randn({2, 6})}});
  for (const std::string& args : std::vector<std::string>{"", "info", "nonsense " + model_, "forward " + model_ + " --input " + in,
                                 "forward " + model_ + " --input " + in + " --output o --ablate x",
                                 "forward " + model_ + " --input " + in + " --output o --ablate 99",
                                 "forward " + model_ + " --input " + in + " --output o --layer nope",
                                 "info " + model_ + " --activation sparsemax"}) {
    auto r = mumoe_cli(args);
    EXPECT_EQ(r.code, 1) << "mumoe " << args << "\n" << r.out;
  }
}

TEST_F(Cli, InvalidInputExitsWithTwoAndNamesTheFile) {
  const auto garbage = dir_.file("garbage.safetensors");
  testkit::write_bytes(garbage, "this is not a model");
  const auto no_input = dir_.file("noinput.safetensors");
  io::write_safetensors(no_input, {{"x", torch::randn({2, 6})}});
  const auto wrong_shape = dir_.file("shape.safetensors");
  io::write_safetensors(wrong_shape, {{"input", torch::randn({2, 7})}});
  const auto nan_input = dir_.file("nan.safetensors");
  auto nan = torch::randn({2, 6});
  nan[1][3] = std::numeric_limits<float>::quiet_NaN();
  io::write_safetensors(nan_input, {{"input", nan}});
  const auto out = dir_.file("out.safetensors");

  const std::vector<std::pair<std::string, std::string>> cases = {
      {"info " + dir_.file("missing.safetensors"), "missing.safetensors: does not exist"},
      {"info " + garbage, "garbage.safetensors: not a model file this program reads"},  // what it is not, first
      {"forward " + garbage + " --input " + no_input + " --output " + out, "garbage.safetensors"},
      {"forward " + model_ + " --input " + no_input + " --output " + out, "noinput.safetensors: no tensor named 'input'"},
      {"forward " + model_ + " --input " + wrong_shape + " --output " + out, "shape.safetensors: tensor 'input' has shape"},
      {"forward " + model_ + " --input " + nan_input + " --output " + out, "nan.safetensors: tensor 'input' contains NaN"},
  };
  for (const auto& [args, message] : cases) {
    auto r = mumoe_cli(args);
    EXPECT_EQ(r.code, 2) << "mumoe " << args << "\n" << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << r.out;
  }
  EXPECT_FALSE(std::filesystem::exists(out));  // nothing half-written
}

}  // namespace
