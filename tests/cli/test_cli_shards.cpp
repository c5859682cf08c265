// `mumoe analyze --shard K/N` and `mumoe cache merge`: the demo's head and the demo GPT's block,
// extracted in shards into caches of their own and merged, answer exactly as one whole run does;
// a missing shard is exit 2 naming the chunks; a bad K/N is a usage error. The same for sweeps
// (`ablate --all --shard K/N`): a ViT block's and a GPT block's experts swept in shards merge into
// the sweep of one whole run, which `ablate --all` then reads from the cache.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "cli_runner.h"
#include "temp_dir.h"

namespace cli_shards_test {

using mumoe::testkit::json_output;
using mumoe::testkit::run_cli;
using mumoe::testkit::run_shell;
using mumoe::testkit::TempDir;

// A command's JSON answer without what differs between two caches of the same answers.
nlohmann::json answer(const std::string& args) {
  auto j = json_output(run_cli(args + " --json --quiet"));
  for (const auto* volatile_field : {"seconds", "cache", "from_cache"}) j.erase(volatile_field);
  return j;
}

// Runs `command` (e.g. "analyze MODEL …", "ablate MODEL … --all") as `n` shards, each into a cache
// of its own named after `name`, merges them and returns the merged cache.
std::string sharded_into(const TempDir& dir, const std::string& command, int n, const std::string& name) {
  std::string shards;
  for (int k = 0; k < n; ++k) {
    const auto cache = dir.file(name + "-" + std::to_string(k) + ".sqlite");
    const auto run = run_cli(command + " --shard " + std::to_string(k) + "/" + std::to_string(n) + " --cache " + cache +
                             " --json --quiet");
    EXPECT_EQ(run.code, 0) << run.out;
    shards += " " + cache;
  }
  const auto merged = dir.file(name + "-merged.sqlite");
  const auto run = run_cli("cache merge" + shards + " --into " + merged + " --json --quiet");
  EXPECT_EQ(run.code, 0) << run.out;
  return merged;
}

// Extracts `model_args` in `n` shards and merges them.
std::string sharded(const TempDir& dir, const std::string& model_args, int n) {
  return sharded_into(dir, "analyze " + model_args, n, "shard");
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


// Sweeps `args`' layer in `n` shards (sweep-K.sqlite) and merges them.
std::string sweep_sharded(const TempDir& dir, const std::string& args, int n) {
  return sharded_into(dir, "ablate " + args + " --all", n, "sweep");
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(CliShards, ABackboneLayersSweepInShardsMergesIntoTheSweepOfOneRun) {
  TempDir dir;
  const auto model = std::string(MUMOE_SOURCE_DIR) + "/resources/demo/vit-blocks-fmnist.mumoe.safetensors";
  const auto args = model + " --layer blocks.2.mlp --max-images 100";  // 32 experts: shards of 10, 11, 11
  const auto merged = sweep_sharded(dir, args, 3);
  const auto from_merged = json_output(run_cli("ablate " + args + " --all --cache " + merged + " --json --quiet"));
  const auto whole = json_output(run_cli("ablate " + args + " --all --cache " + dir.file("whole.sqlite") + " --json --quiet"));
  EXPECT_TRUE(from_merged.at("from_cache").get<bool>());  // no expert removed again
  EXPECT_FALSE(whole.at("from_cache").get<bool>());
  ASSERT_EQ(whole.at("experts").size(), 32u);
  EXPECT_EQ(from_merged.at("experts"), whole.at("experts"));
  EXPECT_EQ(from_merged.at("experts_with_effect"), whole.at("experts_with_effect"));
  EXPECT_EQ(from_merged.at("mean_polysemanticity"), whole.at("mean_polysemanticity"));

  // Refused, exit 2, the target byte for byte as it was: a shard left out (named with its
  // experts), one given twice, one of another run (other images), a damaged part.
  const auto before = file_bytes(merged);
  const auto s = [&](int k) { return dir.file("sweep-" + std::to_string(k) + ".sqlite"); };
  const auto missing = run_cli("cache merge " + s(0) + " " + s(2) + " --into " + merged);
  EXPECT_EQ(missing.code, 2) << missing.out;
  EXPECT_NE(missing.out.find("sweep shard 1/3 (experts 10–20) is not among the 2 files given"), std::string::npos)
      << missing.out;
  EXPECT_EQ(run_cli("cache merge " + s(0) + " " + s(1) + " " + s(1) + " --into " + merged).code, 2);
  const auto other = dir.file("other.sqlite");
  ASSERT_EQ(run_cli("ablate " + model + " --layer blocks.2.mlp --max-images 60 --all --shard 1/3 --cache " + other +
                    " --quiet").code, 0);
  const auto foreign = run_cli("cache merge " + s(0) + " " + other + " " + s(2) + " --into " + merged);
  EXPECT_EQ(foreign.code, 2) << foreign.out;
  EXPECT_NE(foreign.out.find(other + ": is a sweep shard of another run"), std::string::npos) << foreign.out;
  // Shard 1's part loses its last expert.
  ASSERT_EQ(run_shell("/usr/bin/python3 -c \"import json, sqlite3, sys; db = sqlite3.connect(sys.argv[1]); "
                      "(key, text), = db.execute(\\\"SELECT key, json FROM results WHERE kind = 'sweep-part'\\\"); "
                      "j = json.loads(text); j['answer']['experts'].pop(); "
                      "db.execute('UPDATE results SET json = ? WHERE key = ?', (json.dumps(j), key)); db.commit()\" " +
                      s(1)).code, 0);
  const auto damaged = run_cli("cache merge " + s(0) + " " + s(1) + " " + s(2) + " --into " + merged);
  EXPECT_EQ(damaged.code, 2) << damaged.out;
  EXPECT_NE(damaged.out.find("does not hold exactly experts 10–20 of shard 1/3"), std::string::npos) << damaged.out;
  EXPECT_EQ(file_bytes(merged), before);
  // A shard's file cut short (its task killed mid-write, a full disk): named, exit 2.
  std::filesystem::resize_file(s(0), std::filesystem::file_size(s(0)) / 2);
  const auto cut = run_cli("cache merge " + s(0) + " " + s(1) + " " + s(2) + " --into " + merged);
  EXPECT_EQ(cut.code, 2) << cut.out;
  EXPECT_NE(cut.out.find(s(0) + ": is not a mumoe analysis cache (corrupt"), std::string::npos) << cut.out;
  EXPECT_EQ(file_bytes(merged), before);

  // A head's sweep is not sharded (its extraction is); --shard needs --all.
  const auto demo = std::string(MUMOE_SOURCE_DIR) + "/resources/demo/demo.mumoe.safetensors";
  EXPECT_EQ(run_cli("ablate " + demo + " --all --shard 0/2 --cache " + dir.file("h.sqlite")).code, 1);
  EXPECT_EQ(run_cli("ablate " + args + " --experts 3 --shard 0/2 --cache " + dir.file("h.sqlite")).code, 1);
  EXPECT_FALSE(std::filesystem::exists(dir.file("h.sqlite")));
}

TEST(CliShards, AGptBlocksSweepInShardsMergesIntoTheSweepOfOneRun) {
  TempDir dir;
  const auto model = std::string(MUMOE_SOURCE_DIR) + "/resources/demo/gpt-fortunes.mumoe.safetensors";
  const auto args = model + " --layer 3 --max-sequences 16";
  const auto merged = sweep_sharded(dir, args, 2);
  const auto from_merged = json_output(run_cli("ablate " + args + " --all --cache " + merged + " --json --quiet"));
  const auto whole = json_output(run_cli("ablate " + args + " --all --cache " + dir.file("whole.sqlite") + " --json --quiet"));
  EXPECT_TRUE(from_merged.at("from_cache").get<bool>());
  ASSERT_EQ(whole.at("experts").size(), 32u);
  for (const auto* field : {"experts", "loss_before", "accuracy_before", "experts_with_effect", "mean_polysemanticity"})
    EXPECT_EQ(from_merged.at(field), whole.at(field)) << field;
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

// `slurm sweep --dry-run`: each task runs ablate's options with --all and its shard; --experts is
// refused (a sweep removes every expert in turn).
TEST(CliSlurm, SweepDryRunPrintsAnArrayOfAblateTasks) {
  TempDir dir;
  const auto model = std::string(MUMOE_SOURCE_DIR) + "/resources/demo/vit-blocks-fmnist.mumoe.safetensors";
  const auto run = run_cli("slurm sweep --shards 4 --work-dir " + dir.file("work") + " --cache " + dir.file("c.sqlite") +
                           " --dry-run " + model + " --layer blocks.1.mlp --max-images 500");
  ASSERT_EQ(run.code, 0) << run.out;
  for (const auto* line : {"work/sweep.sbatch", "#SBATCH --array=0-3", "' ablate '", "'--layer' 'blocks.1.mlp' "
                           "'--max-images' '500' --all --shard \"${SLURM_ARRAY_TASK_ID}/4\"", "cache merge"})
    EXPECT_NE(run.out.find(line), std::string::npos) << line << "\n" << run.out;
  EXPECT_EQ(run_cli("slurm sweep --shards 4 --dry-run " + model + " --layer blocks.1.mlp --experts 3").code, 1);
  EXPECT_EQ(run_cli("slurm sweep --shards 4 --dry-run " + model + " --layr blocks.1.mlp").code, 1);
  // What would make every task fail: a head (its extraction is what is sharded), --recompute.
  const auto demo = std::string(MUMOE_SOURCE_DIR) + "/resources/demo/demo.mumoe.safetensors";
  EXPECT_EQ(run_cli("slurm sweep --shards 4 --dry-run " + demo).code, 1);
  EXPECT_EQ(run_cli("slurm sweep --shards 4 --dry-run " + model + " --layer blocks.1.mlp --recompute").code, 1);
}

}  // namespace cli_shards_test
