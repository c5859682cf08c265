// The analysis commands (analyze, stats, gallery, ablate) end to end, each checked against an
// independent computation from the model file — the expert's factor row literally zeroed and the
// layer run directly — not against the analysis library. Also: interruption by kill -9 and
// resumption, an unusable cache file, and bad requests.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "analysis_fixture.h"
#include "cli_runner.h"
#include "io/safetensors.h"
#include "temp_dir.h"

using namespace mumoe;

namespace {

class CliAnalysis : public ::testing::Test {
 protected:
  void SetUp() override {
    fixture_ = testkit::write_analysis_fixture(dir_.path().string(),
                                               testkit::head_config(nn::Factorization::CP, {12}, 4), 300, 21);
    common_ = fixture_.model_path + " --data features:" + fixture_.features_path + " --cache " +
              dir_.file("cache.sqlite") + " --chunk-size 64 --quiet ";
  }

  nlohmann::json run_json(const std::string& args) {
    const auto run = testkit::run_cli(args);
    EXPECT_EQ(run.code, 0) << run.out;
    // Warnings go to stderr, which the runner merges: the JSON document starts at the first '{'.
    return nlohmann::json::parse(run.out.substr(run.out.find('{')));
  }

  std::vector<double> independent_accuracy(const std::vector<int64_t>& experts) {
    return testkit::zeroed_rows_accuracy(fixture_, experts);
  }

  testkit::TempDir dir_;
  testkit::AnalysisFixture fixture_;
  std::string common_;
};

void expect_near(const std::vector<double>& a, const std::vector<double>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-12) << "class " << i;
}

TEST_F(CliAnalysis, AnalyzeExtractsOnceAndReportsAccuracy) {
  const auto first = run_json("analyze " + common_ + "--json");
  EXPECT_EQ(first["samples"], 300);
  EXPECT_EQ(first["chunks_computed"], 5);
  expect_near(first["per_class_accuracy"].get<std::vector<double>>(), independent_accuracy({}));
  const auto second = run_json("analyze " + common_ + "--json");
  EXPECT_EQ(second["chunks_computed"], 0);
  EXPECT_EQ(second["chunks_reused"], 5);
}

TEST_F(CliAnalysis, AblateASetMatchesZeroedFactorRows) {
  const auto j = run_json("ablate " + common_ + "--experts 2,7 --json");
  for (const char* key : {"class_names", "per_class_accuracy_before", "accuracy_before", "experts", "seconds"})
    EXPECT_TRUE(j.contains(key)) << key;
  expect_near(j["per_class_accuracy_before"].get<std::vector<double>>(), independent_accuracy({}));
  ASSERT_EQ(j["experts"].size(), 1u);
  const auto& e = j["experts"][0];
  EXPECT_EQ(e["experts"], (std::vector<int64_t>{2, 7}));
  expect_near(e["per_class_accuracy_after"].get<std::vector<double>>(), independent_accuracy({2, 7}));
  EXPECT_TRUE(e.contains("polysemanticity"));
  EXPECT_TRUE(e.contains("accuracy_after"));
  // The naive method gives the same answer.
  const auto naive = run_json("ablate " + common_ + "--experts 2,7 --method naive --json");
  EXPECT_EQ(naive["experts"][0]["per_class_accuracy_after"], e["per_class_accuracy_after"]);
}

TEST_F(CliAnalysis, SweepHasOneEntryPerExpertMatchingZeroedRows) {
  const auto j = run_json("ablate " + common_ + "--all --json");
  ASSERT_EQ(j["experts"].size(), 12u);
  int with_effect = 0;
  for (int64_t n = 0; n < 12; ++n) {
    const auto& e = j["experts"][n];
    EXPECT_EQ(e["expert"], n);
    const auto expected = independent_accuracy({n});
    expect_near(e["per_class_accuracy_after"].get<std::vector<double>>(), expected);
    with_effect += e["has_effect"].get<bool>();
  }
  EXPECT_GT(with_effect, 0);
  EXPECT_EQ(j["experts_with_effect"], with_effect);
  EXPECT_FALSE(j["from_cache"].get<bool>());
  EXPECT_TRUE(run_json("ablate " + common_ + "--all --json")["from_cache"].get<bool>());
}

TEST_F(CliAnalysis, TopGalleryListsTheLargestCoefficients) {
  const auto j = run_json("gallery " + common_ + "--expert 3 --order top --count 5 --json");
  const auto file = model::ModelFile::load(fixture_.model_path);
  auto block = file.build_layer("head", torch::kFloat64);
  const auto data = io::SafetensorsFile::open(fixture_.features_path);
  torch::NoGradGuard no_grad;
  const auto a = block->coefficients(data.read("features").to(torch::kFloat64))[0].select(1, 3);
  const auto top = std::get<0>(a.topk(5));
  ASSERT_EQ(j["items"].size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(j["items"][i]["coefficient"].get<double>(), top[i].item<double>(), 1e-12);
  EXPECT_EQ(j["eligible"], (a > 0).sum().item<int64_t>());
}

TEST_F(CliAnalysis, StatsCountLoadFromTheCoefficients) {
  const auto j = run_json("stats " + common_ + "--json");
  const auto file = model::ModelFile::load(fixture_.model_path);
  auto block = file.build_layer("head", torch::kFloat64);
  const auto data = io::SafetensorsFile::open(fixture_.features_path);
  torch::NoGradGuard no_grad;
  const auto a = block->coefficients(data.read("features").to(torch::kFloat64))[0];
  ASSERT_EQ(j["experts"].size(), 12u);
  int64_t dead = 0;
  for (int64_t n = 0; n < 12; ++n) {
    const auto load = (a.select(1, n) >= 0.5).sum().item<int64_t>();
    EXPECT_EQ(j["experts"][n]["load"], load) << "expert " << n;
    dead += load == 0;
  }
  EXPECT_EQ(j["dead_experts"], dead);
}

TEST_F(CliAnalysis, KilledExtractionResumes) {
  // Enough chunks (committed whole, a batch every 20 ms or so) that the kill lands half-way.
  testkit::TempDir big;
  const auto f = testkit::write_analysis_fixture(big.path().string(),
                                                 testkit::head_config(nn::Factorization::CP, {12}, 4), 40000, 4);
  const auto cache = big.file("cache.sqlite");
  const pid_t child = fork();
  if (child == 0) {
    ::execl(MUMOE_CLI_PATH, MUMOE_CLI_PATH, "analyze", f.model_path.c_str(), "--data",
            ("features:" + f.features_path).c_str(), "--cache", cache.c_str(), "--chunk-size", "20", "--quiet",
            static_cast<char*>(nullptr));
    _exit(127);
  }
  // Kill as soon as a few chunks are committed, counted through SQLite itself (a reader beside
  // the WAL writer): the log's size says how much was written, not whether a chunk was committed
  // (the schema alone is several pages, and a chunk's size depends on its coefficients' form).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto committed_chunks = [&]() -> int64_t {
    if (!std::filesystem::exists(cache)) return 0;
    sqlite3* db = nullptr;
    int64_t count = 0;
    if (sqlite3_open_v2(cache.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
      sqlite3_stmt* s = nullptr;
      // Fails (count stays 0) until the schema exists or while the writer holds an exclusive lock.
      if (sqlite3_prepare_v2(db, "SELECT count(*) FROM chunks", -1, &s, nullptr) == SQLITE_OK &&
          sqlite3_step(s) == SQLITE_ROW)
        count = sqlite3_column_int64(s, 0);
      sqlite3_finalize(s);
    }
    sqlite3_close(db);
    return count;
  };
  while (std::chrono::steady_clock::now() < deadline && committed_chunks() < 5)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the extraction finished before it could be killed";

  const auto resumed = run_json("analyze " + f.model_path + " --data features:" + f.features_path + " --cache " +
                                cache + " --chunk-size 20 --quiet --json");
  EXPECT_GT(resumed["chunks_reused"].get<int64_t>(), 0);
  EXPECT_GT(resumed["chunks_computed"].get<int64_t>(), 0);
  EXPECT_EQ(resumed["chunks_reused"].get<int64_t>() + resumed["chunks_computed"].get<int64_t>(), 2000);
  const auto clean = run_json("analyze " + f.model_path + " --data features:" + f.features_path + " --cache " +
                              big.file("clean.sqlite") + " --chunk-size 20 --quiet --json");
  EXPECT_EQ(resumed["per_class_accuracy"], clean["per_class_accuracy"]);
}

// Garbage in the program's own cache directory ($MUMOE_CACHE's) is a damaged cache: set aside.
// (Elsewhere a file that is not a cache is refused and left alone: test_cli_hostile_input.cpp.)
TEST_F(CliAnalysis, UnusableCacheIsReportedAndSetAside) {
  testkit::write_bytes(dir_.file("cache.sqlite"), "a cache file whose header was destroyed\n");
  ::setenv("MUMOE_CACHE", dir_.file("cache.sqlite").c_str(), 1);
  const auto run = testkit::run_cli("analyze " + common_);
  ::unsetenv("MUMOE_CACHE");
  EXPECT_EQ(run.code, 0) << run.out;
  EXPECT_NE(run.out.find("warning: the cache file was unusable"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find(".unusable-"), std::string::npos) << run.out;
}

TEST_F(CliAnalysis, BadRequestsAreUsageErrorsAndBadFilesAreNamed) {
  EXPECT_EQ(testkit::run_cli("ablate " + common_).code, 1);                        // neither --experts nor --all
  EXPECT_EQ(testkit::run_cli("ablate " + common_ + "--experts 2 --all").code, 1);  // both
  const auto range = testkit::run_cli("ablate " + common_ + "--experts 12");
  EXPECT_EQ(range.code, 1);
  EXPECT_NE(range.out.find("experts 0–11"), std::string::npos) << range.out;
  EXPECT_EQ(testkit::run_cli("ablate " + common_ + "--experts 1 --method magic").code, 1);
  EXPECT_EQ(testkit::run_cli("gallery " + common_ + "--expert 1 --order sideways").code, 1);
  const auto missing = testkit::run_cli("analyze " + dir_.file("nope.safetensors") + " --data features:" +
                                        fixture_.features_path + " --cache " + dir_.file("c2.sqlite"));
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.out.find("nope.safetensors"), std::string::npos) << missing.out;
  testkit::write_bytes(dir_.file("truncated.safetensors"), testkit::read_bytes(fixture_.features_path).substr(0, 100));
  const auto truncated = testkit::run_cli("analyze " + fixture_.model_path + " --data features:" +
                                          dir_.file("truncated.safetensors") + " --cache " + dir_.file("c3.sqlite"));
  EXPECT_EQ(truncated.code, 2);
  EXPECT_NE(truncated.out.find("truncated.safetensors"), std::string::npos) << truncated.out;
}

}  // namespace

namespace {

// `mumoe train --router` writes a sparse or soft MoE head that `mumoe info`, `mumoe ablate` and
// `mumoe compare` read; compare puts it beside a μMoE head, and its rows' accuracy equals the
// trained head evaluated here directly, group by group.
TEST(CliRouterHeads, TrainInfoAblateAndCompareBesideAMuMoEHead) {
  testkit::TempDir dir;
  const auto fixture = testkit::write_analysis_fixture(dir.path().string(),
                                                       testkit::head_config(nn::Factorization::CP, {8}, 4), 256, 3);
  const auto data = "features:" + fixture.features_path;
  const auto head = dir.file("soft.safetensors");
  auto run = testkit::run_cli("train --data " + data + " --test-data " + data + " --router softmax-expert-choice" +
                              " --experts 4 --group 64 --epochs 2 --quiet --output " + head);
  ASSERT_EQ(run.code, 0) << run.out;

  run = testkit::run_cli("info --json " + head);
  ASSERT_EQ(run.code, 0) << run.out;
  const auto info = nlohmann::json::parse(run.out.substr(run.out.find('{')));
  EXPECT_EQ(info["layers"][0]["family"], "Softmax Expert Choice");
  EXPECT_EQ(info["layers"][0]["router_config"]["group_size"], 64);

  // The head evaluated here: groups of 64 rows, float64.
  const auto file = model::ModelFile::load(head);
  auto layer = file.build_router_layer("head", torch::kFloat64);
  const auto features = io::SafetensorsFile::open(fixture.features_path);
  const auto x = features.read("features").to(torch::kFloat64);
  const auto labels = features.read("labels");
  torch::Tensor predictions;
  {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> parts;
    for (int64_t b = 0; b < x.size(0); b += 64) parts.push_back(layer->forward(x.slice(0, b, b + 64)).output.argmax(1));
    predictions = torch::cat(parts);
  }
  const double accuracy = (predictions == labels).to(torch::kDouble).mean().item<double>();

  // `mumoe forward` on the router head, expert 1 removed: the head evaluated here in groups of
  // 64 with expert 1 removed (float64 input → float64 pass).
  io::write_safetensors(dir.file("input.safetensors"), {{"input", x}}, {});
  run = testkit::run_cli("forward " + head + " --input " + dir.file("input.safetensors") + " --ablate 0:1 --output " +
                         dir.file("forward.safetensors"));
  ASSERT_EQ(run.code, 0) << run.out;
  {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> parts;
    for (int64_t b = 0; b < x.size(0); b += 64) parts.push_back(layer->forward(x.slice(0, b, b + 64), {1}).output);
    const auto forwarded = io::SafetensorsFile::open(dir.file("forward.safetensors")).read("output");
    const auto expected = torch::cat(parts);
    EXPECT_LT((forwarded - expected).abs().max().item<double>(), 1e-12);
    std::vector<torch::Tensor> whole;
    for (int64_t b = 0; b < x.size(0); b += 64) whole.push_back(layer->forward(x.slice(0, b, b + 64)).output);
    EXPECT_GT((forwarded - torch::cat(whole)).abs().max().item<double>(), 1e-6) << "removing expert 1 changed nothing";
  }

  const auto cache = " --cache " + dir.file("cache.sqlite");
  run = testkit::run_cli("ablate " + head + " --data " + data + cache + " --experts 1 --json --quiet");
  ASSERT_EQ(run.code, 0) << run.out;

  run = testkit::run_cli("compare " + head + " " + fixture.model_path + " " + dir.file("missing.safetensors") +
                         " --data " + data + cache + " --json --quiet");
  EXPECT_EQ(run.code, 2) << run.out;  // the missing model fails; the others still have rows
  const auto rows = nlohmann::json::parse(run.out.substr(run.out.find('[')));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0]["family"], "Softmax Expert Choice");
  EXPECT_DOUBLE_EQ(rows[0]["accuracy"].get<double>(), accuracy);
  EXPECT_EQ(rows[0]["experts"], 4);
  EXPECT_EQ(rows[1]["family"], "μMoE CP");
  EXPECT_EQ(rows[1]["dropped_tokens"], 0);
  EXPECT_TRUE(rows[2].contains("error"));
  EXPECT_NE(rows[2]["error"].get<std::string>().find("missing.safetensors"), std::string::npos);

}

}  // namespace
