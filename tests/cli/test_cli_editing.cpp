// The bias-correction commands end to end on a small synthetic biased task (feature files the
// test writes): multi-label training, fairness, rewrite with export and session, export from
// edits and from the session, and the error contract.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "biased_head.h"
#include "cli_runner.h"
#include "temp_dir.h"

namespace mumoe {
namespace {

using testkit::run_cli;

nlohmann::json json_of(const testkit::CliRun& run) {
  const auto start = run.out.find('{');
  EXPECT_NE(start, std::string::npos) << run.out;
  return nlohmann::json::parse(run.out.substr(start == std::string::npos ? 0 : start));
}

class CliEditing : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir = new testkit::TempDir();
    // The commands keep their per-sample arrays in the analysis cache: a private one here.
    ::setenv("MUMOE_CACHE", dir->file("cache.sqlite").c_str(), 1);
    test_data = testkit::train_biased_head(*dir);
  }
  static void TearDownTestSuite() { delete dir; }
  static std::string f(const std::string& name) { return dir->file(name); }
  static std::string data_args() {
    return " --data features:" + f("test.safetensors") + " --train-data features:" + f("train.safetensors");
  }
  static testkit::TempDir* dir;
  static data::Dataset test_data;
};
testkit::TempDir* CliEditing::dir = nullptr;
data::Dataset CliEditing::test_data;

TEST_F(CliEditing, MultiLabelTrainingEvaluatesEachTarget) {
  const auto run = run_cli("evaluate " + f("head.safetensors") + " --data features:" + f("test.safetensors") + " --json");
  ASSERT_EQ(run.code, 0) << run.out;
  const auto j = json_of(run);
  EXPECT_EQ(j["task"], "multilabel");
  EXPECT_EQ(j["class_names"], nlohmann::json({"t", "u"}));
  // Learnable targets: clearly above always answering the majority value.
  for (int64_t k : {0, 2}) {  // attributes t and u = outputs 0 and 1
    const double positive = test_data.attributes.select(1, k).to(torch::kDouble).mean().item<double>();
    const double majority = std::max(positive, 1 - positive);
    EXPECT_GT(j["per_class_accuracy"][k / 2].get<double>(), majority + 0.05) << "attribute " << k;
  }
}

TEST_F(CliEditing, FairnessCountsTheFourCells) {
  const auto run = run_cli("fairness " + f("head.safetensors") + " --data features:" + f("test.safetensors") +
                           " --target t --sensitive s --subpop 't=1&s=1' --json");
  ASSERT_EQ(run.code, 0) << run.out;
  const auto j = json_of(run);
  int64_t expected[2][2] = {{0, 0}, {0, 0}};
  for (int64_t i = 0; i < test_data.size(); ++i)
    ++expected[test_data.attributes[i][0].item<int64_t>()][test_data.attributes[i][1].item<int64_t>()];
  for (const auto& cell : j["cells"])
    EXPECT_EQ(cell["count"].get<int64_t>(), expected[cell["target"].get<int>()][cell["sensitive"].get<int>()]);
  EXPECT_EQ(j["samples"], 1000);
}

// A multi-label Softmax Expert Choice head (`train --router --targets`) through the same workflow:
// the edit is folded into the experts' output biases, and the exported file evaluates like the
// live edit (1,000 test samples in groups of 128: evaluation must route the groups the study
// routed, which a batch of 500 would not).
TEST_F(CliEditing, RouterHeadRewriteExportsAVerifiedModel) {
  auto run = run_cli("train --data features:" + f("train.safetensors") + " --test-data features:" + f("test.safetensors") +
                     " --router softmax-expert-choice --experts 6 --group 128" +
                     " --targets t,u --epochs 3 --seed 1 --quiet --output " + f("soft.safetensors"));
  ASSERT_EQ(run.code, 0) << run.out;
  run = run_cli("rewrite " + f("soft.safetensors") + data_args() + " --target t --subpop 't=1&s=1' --quiet --json" +
                " --output " + f("soft-edited.safetensors"));
  ASSERT_EQ(run.code, 0) << run.out;
  const auto j = json_of(run);
  EXPECT_LE(j["export"]["max_abs_difference"].get<double>(), 1e-5);
  const auto eval =
      run_cli("evaluate " + f("soft-edited.safetensors") + " --data features:" + f("test.safetensors") + " --json");
  ASSERT_EQ(eval.code, 0) << eval.out;
  EXPECT_NEAR(json_of(eval)["per_class_accuracy"][0].get<double>(), j["after"]["per_target_accuracy"][0].get<double>(),
              1e-9);
  EXPECT_NE(j["after"]["per_target_accuracy"][0], j["before"]["per_target_accuracy"][0]) << "the edit changed nothing";
}

TEST_F(CliEditing, RewriteExportsAVerifiedModelThatEvaluatesLikeTheLiveEdit) {
  const auto run = run_cli("rewrite " + f("head.safetensors") + data_args() +
                           " --target t --subpop 't=1&s=1' --quiet --json --output " + f("edited.safetensors") +
                           " --edits-out " + f("edits.json") + " --session " + f("session.sqlite"));
  ASSERT_EQ(run.code, 0) << run.out;
  const auto j = json_of(run);
  EXPECT_LE(j["export"]["max_abs_difference"].get<double>(), 1e-5);
  EXPECT_GT(j["edits"][0]["lambda"].get<double>(), 0);  // (t=1, s=1) is under-predicted here
  EXPECT_GE(j["after"]["target_subpopulation_accuracy"].get<double>(),
            j["before"]["target_subpopulation_accuracy"].get<double>());

  // The folded file through the ordinary evaluation path gives the live edit's accuracy.
  const auto eval = run_cli("evaluate " + f("edited.safetensors") + " --data features:" + f("test.safetensors") + " --json");
  ASSERT_EQ(eval.code, 0) << eval.out;
  EXPECT_NEAR(json_of(eval)["per_class_accuracy"][0].get<double>(), j["after"]["per_target_accuracy"][0].get<double>(),
              1e-9);

  // The same edit exported later from the edits file and from the session.
  auto from_file = run_cli("export " + f("head.safetensors") + " --edits " + f("edits.json") + " --output " +
                           f("ref.safetensors") + " --layout reference --data features:" + f("test.safetensors") + " --json");
  ASSERT_EQ(from_file.code, 0) << from_file.out;
  EXPECT_LE(json_of(from_file)["max_abs_difference"].get<double>(), 1e-5);
  auto from_session = run_cli("export " + f("head.safetensors") + " --session " + f("session.sqlite") + " --output " +
                              f("from-session.safetensors") + " --data features:" + f("test.safetensors"));
  ASSERT_EQ(from_session.code, 0) << from_session.out;
  EXPECT_EQ(testkit::read_bytes(f("from-session.safetensors")).size(), testkit::read_bytes(f("edited.safetensors")).size());
}

TEST_F(CliEditing, BaselinesAreReportedWithMrs) {
  const auto run = run_cli("rewrite " + f("head.safetensors") + data_args() +
                           " --target t --subpop 't=1&s=1' --baselines --oversample-epochs 2 --quiet --json");
  ASSERT_EQ(run.code, 0) << run.out;
  const auto j = json_of(run);
  ASSERT_TRUE(j["baselines"].contains("blind threshold"));
  ASSERT_TRUE(j["baselines"].contains("oversample"));
  EXPECT_TRUE(j["baselines"]["oversample"].contains("mrs"));
  // Every relative figure names its reference: the model as opened (no session edits here).
  EXPECT_FALSE(j["before"].contains("mrs"));
  EXPECT_EQ(j["before"]["name"], "model");
  EXPECT_EQ(j["after"]["mrs_reference"], "model");
  EXPECT_EQ(j["baselines"]["oversample"]["mrs_reference"], "model");
  EXPECT_EQ(j["baselines"]["blind threshold"]["mrs_reference"], "model");
  EXPECT_GT(j["baselines"]["oversample"]["repeat_factor"].get<int64_t>(), 1);
  // MRS = target gain − damage elsewhere, recomputed from the reported cells.
  double mrs = 0;
  for (size_t c = 0; c < 4; ++c) {
    const auto& b = j["before"]["cells"][c];
    const double change = j["after"]["cells"][c]["accuracy"].get<double>() - b["accuracy"].get<double>();
    mrs += (b["target"] == 1 && b["sensitive"] == 1) ? change : -std::fabs(change);
  }
  EXPECT_NEAR(j["after"]["mrs"].get<double>(), mrs, 1e-12);
}

TEST_F(CliEditing, SessionEditsCombineUndoAndExportOnlyWhatIsApplied) {
  const std::string session = " --session " + f("combined.sqlite");
  auto first = run_cli("rewrite " + f("head.safetensors") + data_args() + " --target t --subpop 't=1&s=1' --quiet --json" +
                       session);
  ASSERT_EQ(first.code, 0) << first.out;
  auto second = run_cli("rewrite " + f("head.safetensors") + data_args() +
                        " --target u --subpop 'u=1&s=0' --lambda 3 --quiet --json" + session);
  ASSERT_EQ(second.code, 0) << second.out;
  const auto j = json_of(second);
  EXPECT_EQ(j["prior_edits"], 1);
  ASSERT_EQ(j["edits"].size(), 2u);
  EXPECT_EQ(j["before"]["name"], "model + 1 edit");
  EXPECT_EQ(j["after"]["mrs_reference"], "model + 1 edit");  // this edit's MRS, not the session's
  // "before" already has the first edit: output t's accuracy equals the first command's "after".
  EXPECT_DOUBLE_EQ(j["before"]["per_target_accuracy"][0].get<double>(),
                   json_of(first)["after"]["per_target_accuracy"][0].get<double>());

  auto list = run_cli("edits " + f("head.safetensors") + session + " --json");
  ASSERT_EQ(list.code, 0) << list.out;
  EXPECT_EQ(json_of(list)["applied"], 2);
  auto undo = run_cli("edits " + f("head.safetensors") + session + " --undo --json");
  ASSERT_EQ(undo.code, 0) << undo.out;
  EXPECT_EQ(json_of(undo)["applied"], 1);

  // Export folds only the applied (first) edit: evaluating it reproduces the first edit's metrics.
  auto exported = run_cli("export " + f("head.safetensors") + session + " --output " + f("undone.safetensors") +
                          " --data features:" + f("test.safetensors"));
  ASSERT_EQ(exported.code, 0) << exported.out;
  const auto eval = run_cli("evaluate " + f("undone.safetensors") + " --data features:" + f("test.safetensors") + " --json");
  ASSERT_EQ(eval.code, 0) << eval.out;
  EXPECT_NEAR(json_of(eval)["per_class_accuracy"][0].get<double>(),
              json_of(first)["after"]["per_target_accuracy"][0].get<double>(), 1e-9);
  EXPECT_NEAR(json_of(eval)["per_class_accuracy"][1].get<double>(),
              json_of(first)["after"]["per_target_accuracy"][1].get<double>(), 1e-9);

  auto redo = run_cli("edits " + f("head.safetensors") + session + " --redo --json");
  EXPECT_EQ(json_of(redo)["applied"], 2);
  EXPECT_EQ(run_cli("edits " + f("head.safetensors") + session + " --redo").code, 1);  // nothing to redo
}

TEST_F(CliEditing, SecondRunReadsTheCacheAndMatchesTheUncachedStudy) {
  const std::string args = "fairness " + f("head.safetensors") + " --data features:" + f("test.safetensors") +
                           " --target t --sensitive s --subpop 't=1&s=1' --json";
  const auto cached = run_cli(args + " --cache " + f("fairness-cache.sqlite"));
  ASSERT_EQ(cached.code, 0) << cached.out;
  const auto again = run_cli(args + " --cache " + f("fairness-cache.sqlite"));
  ASSERT_EQ(again.code, 0) << again.out;
  const auto direct = run_cli(args + " --no-cache");
  ASSERT_EQ(direct.code, 0) << direct.out;
  // The cache holds float64 layer outputs stored as float32; the direct study computes in
  // float32: the same predictions on this data.
  EXPECT_EQ(json_of(cached)["cells"], json_of(direct)["cells"]);
  EXPECT_EQ(json_of(again)["cells"], json_of(cached)["cells"]);
}

TEST_F(CliEditing, ErrorsNameTheProblem) {
  auto run = run_cli("rewrite " + f("head.safetensors") + data_args() + " --target t --subpop 'Male=1&s=1' --sensitive s");
  EXPECT_EQ(run.code, 1);
  EXPECT_NE(run.out.find("no attribute 'Male'"), std::string::npos) << run.out;

  testkit::write_bytes(f("exists.safetensors"), "keep");
  run = run_cli("rewrite " + f("head.safetensors") + data_args() + " --target t --subpop 't=1&s=1' --quiet --output " +
                f("exists.safetensors"));
  EXPECT_EQ(run.code, 1) << run.out;
  EXPECT_EQ(testkit::read_bytes(f("exists.safetensors")), "keep");

  run = run_cli("export " + f("head.safetensors") + " --output " + f("x.safetensors"));
  EXPECT_EQ(run.code, 1) << run.out;
  testkit::write_bytes(f("bad-edits.json"), "{\"edits\": [{\"target\": 3}]");
  run = run_cli("export " + f("head.safetensors") + " --edits " + f("bad-edits.json") + " --output " + f("x.safetensors"));
  EXPECT_EQ(run.code, 2) << run.out;
  EXPECT_NE(run.out.find("bad-edits.json"), std::string::npos) << run.out;

  // An unknown sensitive attribute is a usage error.
  run = run_cli("fairness " + f("head.safetensors") + " --data features:" + f("test.safetensors") +
                " --target t --sensitive nope");
  EXPECT_EQ(run.code, 1) << run.out;
}

}  // namespace
}  // namespace mumoe
