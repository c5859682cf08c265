// The byte-level μMoE GPT through the CLI: train on a text file, evaluate (checked against the
// library on the same held-out documents), generate deterministically, and resume.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <filesystem>

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

TEST_F(CliLanguageModel, RouterMlpGptTrainsEvaluatesAndAblates) {
  // --rank describes μMoE blocks: refused beside --mlp-router, so the small_ flags without it.
  std::string small = small_;
  small.replace(small.find(" --rank 8"), 9, "");
  const std::string router = " --steps 30 --mlp-router softmax-token-choice --mlp-hidden 24 --json";
  const auto with_rank = testkit::run_cli("train --data " + spec_ + " --output " + model_ + router + small_);
  EXPECT_EQ(with_rank.code, 1);
  EXPECT_NE(with_rank.out.find("--rank"), std::string::npos) << with_rank.out;
  auto train = testkit::run_cli("train --data " + spec_ + " --output " + model_ + router + small);
  ASSERT_EQ(train.code, 0) << train.out;
  const auto file = model::ModelFile::load(model_);
  ASSERT_EQ(file.manifest().layers.size(), 1u);
  const auto& layer = file.manifest().layers[0];
  EXPECT_EQ(layer.name, "transformer.h.0.mlp");
  ASSERT_TRUE(layer.is_router());
  EXPECT_EQ(layer.family(), "Softmax Token Choice");
  EXPECT_EQ(layer.router->experts, 4);
  EXPECT_EQ(layer.router->hidden_dim, 24);
  EXPECT_TRUE(layer.router->sequence_groups);

  auto eval = testkit::run_cli("evaluate " + model_ + " --data " + spec_ + " --validation-fraction 0.25 --json");
  ASSERT_EQ(eval.code, 0) << eval.out;
  auto gpt = model::load_gpt(file);
  std::string held_out;
  for (int d = 0; d < 2; ++d) held_out += testkit::read_bytes(dir_.file("doc0.txt")) + "\n";
  const auto expected = train::evaluate_lm(gpt, std::vector<int32_t>(held_out.begin(), held_out.end()));
  EXPECT_NEAR(nlohmann::json::parse(eval.out)["mean_loss"].get<double>(), expected.mean_loss, 1e-6);
  EXPECT_LT(expected.mean_loss, std::log(256.0));

  const std::string common = " --data " + spec_ + " --layer transformer.h.0.mlp --experts 1 "
                             "--quiet --json --cache " + dir_.file("cache.sqlite");
  const auto sparse = testkit::json_output(testkit::run_cli("ablate " + model_ + common));
  const auto naive = testkit::json_output(testkit::run_cli("ablate " + model_ + common + " --method naive"));
  ASSERT_EQ(sparse["experts"].size(), 1u);
  EXPECT_EQ(sparse["experts"][0]["correct_after"], naive["experts"][0]["correct_after"]);
  EXPECT_NEAR(sparse["experts"][0]["loss_after"].get<double>(), naive["experts"][0]["loss_after"].get<double>(), 1e-10);
}

TEST_F(CliLanguageModel, RoutersThatReadLaterTokensAreRefusedForAGpt) {
  std::string small = small_;
  small.replace(small.find(" --rank 8"), 9, "");  // --rank is refused beside --mlp-router
  auto soft = testkit::run_cli("train --data " + spec_ + " --output " + model_ + " --steps 2 --mlp-router soft-moe" + small);
  EXPECT_EQ(soft.code, 1);  // a usage error
  EXPECT_NE(soft.out.find("not causal"), std::string::npos) << soft.out;
  auto top2 = testkit::run_cli("train --data " + spec_ + " --output " + model_ +
                               " --steps 2 --mlp-router softmax-token-choice --top-k 2" + small);
  EXPECT_EQ(top2.code, 1);
  EXPECT_NE(top2.out.find("--top-k"), std::string::npos) << top2.out;
  EXPECT_FALSE(std::filesystem::exists(model_));
}

TEST_F(CliLanguageModel, BadTextDataIsNamed) {
  testkit::write_bytes(dir_.file("bad.txt"), "ok \xff\xfe not utf-8");
  const auto run = testkit::run_cli("train --data text:" + dir_.file("bad.txt") + " --output " + model_ + small_);
  EXPECT_EQ(run.code, 2);
  EXPECT_NE(run.out.find("bad.txt"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("invalid UTF-8"), std::string::npos) << run.out;
}

}  // namespace
