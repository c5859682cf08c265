// `mumoe gallery` and `mumoe ablate` on the demo μMoE GPT (few sequences): token galleries with
// context, sparse vs naive ablation agreeing token for token in their counts, answers from the
// cache, and usage errors.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

#include "cli_runner.h"
#include "temp_dir.h"
#include "text/text_corpus.h"

using namespace mumoe;

namespace {

class CliLmAnalysis : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::is_directory(text::kFortuneDir)) GTEST_SKIP() << text::kFortuneDir << " is not installed";
  }
  std::string model_ = std::string(MUMOE_SOURCE_DIR) + "/resources/demo/gpt-fortunes.mumoe.safetensors";
  testkit::TempDir dir_;
  std::string common_ = " --data fortunes --max-sequences 6 --quiet --json --cache " + dir_.file("cache.sqlite");
};


TEST_F(CliLmAnalysis, TokenGalleryWithContext) {
  const auto g = testkit::json_output(testkit::run_cli("gallery " + model_ + " --layer transformer.h.2.mlp.MuMoE_layer --expert 5" +
                                        " --top --count 5 --context 10" + common_));
  EXPECT_EQ(g["layer"], "transformer.h.2.mlp.MuMoE_layer");
  EXPECT_EQ(g["tokens"], 6 * 128);
  ASSERT_FALSE(g["items"].empty());
  double last = 2;
  for (const auto& item : g["items"]) {
    const double a = item["coefficient"];
    EXPECT_GT(a, 0);
    EXPECT_LE(a, last);  // largest first
    last = a;
    EXPECT_EQ(item["context"], item["context_before"].get<std::string>() + "«" + item["token"].get<std::string>() +
                                   "»" + item["context_after"].get<std::string>());
    EXPECT_LE(item["context_last"].get<int64_t>() - item["context_first"].get<int64_t>(), 21);
    EXPECT_EQ(item["sequence"].get<int64_t>() * 128 + item["position"].get<int64_t>(), item["token_index"]);
  }
  EXPECT_FALSE(g["from_cache"]);
  const auto again = testkit::run_cli("gallery " + model_ + " --layer 2 --expert 5 --order top --count 5 --context 10" +
                                      common_);
  EXPECT_TRUE(testkit::json_output(again)["from_cache"]);
  const auto text = testkit::run_cli("gallery " + model_ + " --layer 2 --expert 5 --top --count 3 --data fortunes" +
                                     " --max-sequences 6 --quiet --cache " + dir_.file("cache.sqlite"));
  EXPECT_EQ(text.code, 0) << text.out;
  EXPECT_NE(text.out.find("«"), std::string::npos) << text.out;
}

TEST_F(CliLmAnalysis, SparseAndNaiveAblationAgree) {
  const std::string layer = " --layer transformer.h.1.mlp.MuMoE_layer";
  const auto sparse = testkit::json_output(testkit::run_cli("ablate " + model_ + layer + " --experts 3,17" + common_));
  const auto naive = testkit::json_output(testkit::run_cli("ablate " + model_ + layer + " --experts 3,17 --method naive" + common_));
  for (const auto* key : {"class_names", "per_class_accuracy_before", "accuracy_before", "loss_before"})
    EXPECT_EQ(sparse[key], naive[key]) << key;
  ASSERT_EQ(sparse["experts"].size(), 1u);
  const auto& s = sparse["experts"][0];
  const auto& n = naive["experts"][0];
  EXPECT_EQ(s["correct_after"], n["correct_after"]);
  EXPECT_EQ(s["changed_predictions"], n["changed_predictions"]);
  EXPECT_NEAR(s["loss_after"].get<double>(), n["loss_after"].get<double>(), 1e-10);
  EXPECT_EQ(s["experts"], (nlohmann::json{3, 17}));
  EXPECT_GT(s["affected_tokens"].get<int64_t>(), 0);
  EXPECT_EQ(sparse["per_class_accuracy_before"].size(), sparse["class_names"].size());
  EXPECT_TRUE(testkit::json_output(testkit::run_cli("ablate " + model_ + layer + " --experts 3,17" + common_))["from_cache"]);
}

TEST_F(CliLmAnalysis, UsageErrors) {
  EXPECT_EQ(testkit::run_cli("ablate " + model_ + " --layer transformer.h.9.mlp.MuMoE_layer --experts 1" + common_).code,
            1);
  EXPECT_EQ(testkit::run_cli("ablate " + model_ + " --experts 1" + common_).code, 1);  // which layer?
  EXPECT_EQ(testkit::run_cli("ablate " + model_ + " --layer 0 --experts 32" + common_).code, 1);
  EXPECT_EQ(testkit::run_cli("gallery " + model_ + " --layer 0 --expert 99" + common_).code, 1);
}

}  // namespace
