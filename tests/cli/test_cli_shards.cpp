// `mumoe analyze --shard K/N` and `mumoe cache merge`: the demo's head and the demo GPT's block,
// extracted in shards into caches of their own and merged, answer exactly as one whole run does;
// a missing shard is exit 2 naming the chunks; a bad K/N is a usage error.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

#include "cli_runner.h"
#include "temp_dir.h"

namespace cli_shards_test {

using mumoe::testkit::json_output;
using mumoe::testkit::run_cli;
using mumoe::testkit::TempDir;

// A command's JSON answer without what differs between two caches of the same answers.
nlohmann::json answer(const std::string& args) {
  auto j = json_output(run_cli(args + " --json --quiet"));
  for (const auto* volatile_field : {"seconds", "cache", "from_cache"}) j.erase(volatile_field);
  return j;
}

// Extracts `model` in `n` shards (one cache each), merges them and returns the merged cache.
std::string sharded(const TempDir& dir, const std::string& model_args, int n) {
  std::string shards;
  for (int k = 0; k < n; ++k) {
    const auto cache = dir.file("shard-" + std::to_string(k) + ".sqlite");
    const auto run = run_cli("analyze " + model_args + " --shard " + std::to_string(k) + "/" + std::to_string(n) +
                             " --cache " + cache + " --json --quiet");
    EXPECT_EQ(run.code, 0) << run.out;
    shards += " " + cache;
  }
  const auto merged = dir.file("merged.sqlite");
  const auto run = run_cli("cache merge" + shards + " --into " + merged + " --json --quiet");
  EXPECT_EQ(run.code, 0) << run.out;
  return merged;
}

TEST(CliShards, AShardedHeadMergesIntoTheAnswersOfOneRun) {
  TempDir dir;
  const auto model = std::string(MUMOE_SOURCE_DIR) + "/resources/demo/demo.mumoe.safetensors";
  const auto args = model + " --data fashion-mnist:test --chunk-size 1000";
  const auto merged = sharded(dir, args, 3);
  const auto whole = dir.file("whole.sqlite");
  ASSERT_EQ(run_cli("analyze " + args + " --cache " + whole + " --quiet").code, 0);
  for (const auto* question : {"stats", "gallery --expert 7", "ablate --experts 7,11"})
    EXPECT_TRUE(answer(std::string(question) + " " + args + " --cache " + merged) ==
                answer(std::string(question) + " " + args + " --cache " + whole))
        << question;

  // Shard 1 of 3 left out: exit 2, naming its chunks; a shard that does not exist: usage error.
  const auto partial = run_cli("cache merge " + dir.file("shard-0.sqlite") + " " + dir.file("shard-2.sqlite") +
                               " --into " + dir.file("partial.sqlite"));
  EXPECT_EQ(partial.code, 2) << partial.out;
  EXPECT_NE(partial.out.find("shard 1/3 (chunks 3–5)"), std::string::npos) << partial.out;
  EXPECT_EQ(run_cli("analyze " + args + " --shard 3/3 --cache " + dir.file("x.sqlite")).code, 1);
  EXPECT_EQ(run_cli("analyze " + args + " --shard 1 --cache " + dir.file("x.sqlite")).code, 1);
}

TEST(CliShards, AShardedGptBlockMergesIntoTheAnswersOfOneRun) {
  TempDir dir;
  const auto model = std::string(MUMOE_SOURCE_DIR) + "/resources/demo/gpt-fortunes.mumoe.safetensors";
  const auto args = model + " --layer 3 --max-sequences 32";  // 2 chunks of 16 sequences
  const auto merged = sharded(dir, args, 2);
  const auto whole = dir.file("whole.sqlite");
  ASSERT_EQ(run_cli("analyze " + args + " --cache " + whole + " --quiet").code, 0);
  EXPECT_TRUE(answer("gallery " + args + " --expert 5 --cache " + merged) ==
              answer("gallery " + args + " --expert 5 --cache " + whole));
}

}  // namespace cli_shards_test

namespace cli_shards_test {

// `slurm analyze --dry-run`: the job array runs analyze's options verbatim with each task's shard
// and cache, the merge names every shard's file; a typo in analyze's options is caught before
// anything is submitted.
TEST(CliSlurm, DryRunPrintsTheArrayAndTheMergeScripts) {
  TempDir dir;
  const auto model = std::string(MUMOE_SOURCE_DIR) + "/resources/demo/demo.mumoe.safetensors";
  const auto run = run_cli("slurm analyze --shards 3 --partition gpu --time 1:00:00 --cpus 4 --work-dir " +
                           dir.file("work") + " --cache \"" + dir.file("it's.sqlite") + "\" --dry-run " + model +
                           " --data fashion-mnist:test --layer head");
  ASSERT_EQ(run.code, 0) << run.out;
  for (const auto* line : {"#SBATCH --array=0-2", "#SBATCH --partition=gpu", "#SBATCH --time=1:00:00",
                           "#SBATCH --cpus-per-task=4", "'--data' 'fashion-mnist:test' '--layer' 'head' --shard "
                           "\"${SLURM_ARRAY_TASK_ID}/3\""})
    EXPECT_NE(run.out.find(line), std::string::npos) << line << "\n" << run.out;
  const auto merge = run.out.substr(run.out.find("merge.sbatch"));
  for (int k = 0; k < 3; ++k)
    EXPECT_NE(merge.find(dir.file("work") + "/shard-" + std::to_string(k) + ".sqlite"), std::string::npos) << merge;
  EXPECT_NE(merge.find("--into '" + dir.path().string() + "/it'\\''s.sqlite'"), std::string::npos) << merge;
  EXPECT_FALSE(std::filesystem::exists(dir.file("work")));  // a dry run writes nothing

  EXPECT_EQ(run_cli("slurm analyze --shards 3 --dry-run " + model + " --dat fashion-mnist:test").code, 1);
  EXPECT_EQ(run_cli("slurm analyze --shards 3 --dry-run " + model + " --shard 1/3").code, 1);
  EXPECT_EQ(run_cli("slurm analyze --shards 1 --dry-run " + model).code, 1);  // one task is analyze itself
  // sbatch splits #SBATCH lines at blanks: a work directory with one is refused, not mangled.
  EXPECT_EQ(run_cli("slurm analyze --shards 2 --work-dir '" + dir.file("my runs") + "' --dry-run " + model).code, 1);
  EXPECT_EQ(run_cli("slurm analyze --shards 2 --dry-run " + dir.file("absent.pth")).code, 2);
}

}  // namespace cli_shards_test
