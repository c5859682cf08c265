// The byte-level μMoE GPT through the CLI: train on a text file, evaluate (checked against the
// library on the same held-out documents), generate deterministically, and resume.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "cli_runner.h"
#include "model/gpt_file.h"
#include "temp_dir.h"
#include "train/lm_training.h"

using namespace mumoe;

namespace {

class CliLanguageModel : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string text;
    for (int i = 0; i < 40; ++i) text += "the cat sat on the mat. ";
    // Several documents so that a validation split exists.
    for (int d = 0; d < 8; ++d) testkit::write_bytes(dir_.file("doc" + std::to_string(d) + ".txt"), text);
    spec_ = "text:" + dir_.path().string();
    model_ = dir_.file("gpt.safetensors");
    small_ = " --layers 1 --embd 32 --heads 2 --experts 4 --rank 8 --block-size 16 --batch-size 4 "
             "--validation-fraction 0.25 --quiet ";
  }
  testkit::TempDir dir_;
  std::string spec_, model_, small_;
};

TEST_F(CliLanguageModel, TrainEvaluateGenerate) {
  auto train = testkit::run_cli("train --data " + spec_ + " --output " + model_ + " --steps 30 --json" + small_);
  ASSERT_EQ(train.code, 0) << train.out;
  const auto file = model::ModelFile::load(model_);
  EXPECT_EQ(file.manifest().architecture, "mumoe-gpt");
  ASSERT_EQ(file.manifest().layers.size(), 1u);
  EXPECT_EQ(file.manifest().layers[0].name, "transformer.h.0.mlp.MuMoE_layer");
  EXPECT_EQ(file.manifest().layers[0].config.expert_dims, (std::vector<int64_t>{4}));

  auto eval = testkit::run_cli("evaluate " + model_ + " --data " + spec_ + " --validation-fraction 0.25 --json");
  ASSERT_EQ(eval.code, 0) << eval.out;
  const auto reported = nlohmann::json::parse(eval.out);
  // The library on the validation documents: two of the eight identical documents.
  auto gpt = model::load_gpt(file);
  std::string held_out;
  for (int d = 0; d < 2; ++d) held_out += testkit::read_bytes(dir_.file("doc0.txt")) + "\n";
  const std::vector<int32_t> tokens(held_out.begin(), held_out.end());
  const auto expected = train::evaluate_lm(gpt, tokens);
  EXPECT_EQ(reported["tokens"], expected.tokens);
  EXPECT_NEAR(reported["mean_loss"].get<double>(), expected.mean_loss, 1e-6);
  EXPECT_LT(expected.mean_loss, std::log(256.0));  // it learned something in 30 steps

  const auto a = testkit::run_cli("generate " + model_ + " --prompt 'the c' --tokens 20 --seed 3 --json");
  const auto b = testkit::run_cli("generate " + model_ + " --prompt 'the c' --tokens 20 --seed 3 --json");
  ASSERT_EQ(a.code, 0) << a.out;
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(nlohmann::json::parse(a.out)["tokens"].size(), 20u);
}

TEST_F(CliLanguageModel, BadTextDataIsNamed) {
  testkit::write_bytes(dir_.file("bad.txt"), "ok \xff\xfe not utf-8");
  const auto run = testkit::run_cli("train --data text:" + dir_.file("bad.txt") + " --output " + model_ + small_);
  EXPECT_EQ(run.code, 2);
  EXPECT_NE(run.out.find("bad.txt"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("invalid UTF-8"), std::string::npos) << run.out;
}

}  // namespace
