// `mumoe steer` on the demo μMoE GPT (few sequences, few bytes): the JSON fields, α = 0 giving
// the unsteered text (= `mumoe generate` with the same seed), α ≠ 0 changing it, the
// side-by-side text output, and usage errors.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

#include "cli_runner.h"
#include "temp_dir.h"
#include "text/text_corpus.h"

using namespace mumoe;

class CliSteer : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::is_directory(text::kFortuneDir)) GTEST_SKIP() << text::kFortuneDir << " is not installed";
  }
  std::string model_ = std::string(MUMOE_SOURCE_DIR) + "/resources/demo/gpt-fortunes.mumoe.safetensors";
  testkit::TempDir dir_;
  std::string common_ = " --data fortunes --max-sequences 6 --quiet --cache " + dir_.file("cache.sqlite");
};

TEST_F(CliSteer, SteeredBesideUnsteered) {
  const std::string base = "steer " + model_ + " --layer transformer.h.2.mlp.MuMoE_layer --expert 5 --prompt 'The '" +
                           " --tokens 40 --seed 1 --threshold 0.3 --json" + common_;
  const auto zero = testkit::json_output(testkit::run_cli(base + " --alpha 0"));
  EXPECT_EQ(zero["layer"], "transformer.h.2.mlp.MuMoE_layer");
  EXPECT_EQ(zero["expert"], 5);
  EXPECT_EQ(zero["prompt"], "The ");
  EXPECT_EQ(zero["alpha"], 0.0);
  EXPECT_GT(zero["tokens_used_for_centre"].get<int64_t>(), 0);
  EXPECT_GT(zero["centre_norm"].get<double>(), 0);
  EXPECT_EQ(zero["unsteered_tokens"].size(), 40u);
  EXPECT_EQ(zero["steered"], zero["unsteered"]);
  EXPECT_EQ(zero["first_difference"], -1);
  // The unsteered text is exactly `mumoe generate` with the same seed and sampling options.
  const auto generated = testkit::json_output(testkit::run_cli("generate " + model_ + " --prompt 'The ' --tokens 40 --seed 1 --json"));
  EXPECT_EQ(zero["unsteered_tokens"], generated["tokens"]);

  const auto steered = testkit::json_output(testkit::run_cli(base + " --alpha 8 --site residual"));
  EXPECT_EQ(steered["unsteered"], zero["unsteered"]);
  EXPECT_NE(steered["steered"], steered["unsteered"]);
  EXPECT_EQ(steered["site"], "residual");
  EXPECT_EQ(steered["centre_norm"], zero["centre_norm"]);

  const auto text = testkit::run_cli("steer " + model_ + " --layer 2 --expert 5 --alpha 4 --tokens 30 --threshold 0.3" +
                                     " --width 80" + common_);
  ASSERT_EQ(text.code, 0) << text.out;
  EXPECT_NE(text.out.find("unsteered"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(" | steered (expert 5, alpha 4.00)"), std::string::npos) << text.out;
}

TEST_F(CliSteer, UsageErrors) {
  EXPECT_EQ(testkit::run_cli("steer " + model_ + " --expert 5 --json" + common_).code, 1);  // which layer?
  EXPECT_EQ(testkit::run_cli("steer " + model_ + " --layer 2 --expert 99 --json" + common_).code, 1);
  EXPECT_EQ(testkit::run_cli("steer " + model_ + " --layer 2 --expert 5 --site gate --json" + common_).code, 1);
  EXPECT_EQ(testkit::run_cli("steer " + model_ + " --layer 2 --expert 5 --threshold 2 --json" + common_).code, 1);
  EXPECT_EQ(testkit::run_cli("steer " + dir_.file("missing.safetensors") + " --layer 2 --expert 5" + common_).code, 2);
}
