// mumoe slurm analyze [--shards N --partition P --time T --cpus C --gpus G --work-dir D --cache F
// --dry-run] MODEL [analyze's options]: the extraction of `mumoe analyze` as a Slurm job array of
// N shards and a merge job that depends on it (slurm_jobs.h). `mumoe slurm sweep … MODEL
// [ablate's options]` does the same for `mumoe ablate --all` of a layer inside a ViT or MLP-Mixer
// or a GPT block, its experts split across the tasks. The task's options are checked here as the
// command would parse them, then passed on verbatim; the scripts are written to the work
// directory and submitted with sbatch, whose job ids are printed. --dry-run prints the scripts
// and submits nothing.
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "analysis/text_analysis_session.h"
#include "analysis/vit_block_analysis.h"
#include "cache/analysis_cache.h"
#include "cli_support.h"
#include "io/atomic_file.h"
#include "io/errors.h"
#include "io/file_checks.h"
#include "slurm_jobs.h"

namespace mumoe::cli {
namespace {

struct SlurmOptions {
  int64_t shards = 0;
  std::string partition, time, work_dir, cache;
  int64_t cpus = 0, gpus = 0;
  bool dry_run = false, json = false;
};

// The path of this program, so that the tasks run the same mumoe.
std::string this_program() {
  std::error_code ec;
  const auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw FileError("/proc/self/exe", "cannot find this program's path: " + ec.message());
  return path.string();
}

// Checks the options meant for each task's command as it would parse them (a typo must not
// become N failed tasks) and returns the model's path.
std::string check_task_args(SlurmWork work, const std::vector<std::string>& args) {
  const std::string command = work == SlurmWork::Sweep ? "ablate" : "analyze";
  const std::string own_command = work == SlurmWork::Sweep ? "slurm sweep" : "slurm analyze";
  for (const auto& arg : args) {
    for (const std::string own : {"--shard", "--cache"})
      if (arg == own || arg.rfind(own + "=", 0) == 0)
        throw UsageError(own + " is set by `" + own_command + "` for each task (the merge's target is its --cache)");
    if (work == SlurmWork::Sweep && (arg == "--experts" || arg.rfind("--experts=", 0) == 0))
      throw UsageError("`slurm sweep` removes every expert in turn (ablate --all); --experts is a single ablation");
  }
  CLI::App probe{"mumoe"};
  const auto task = work == SlurmWork::Sweep ? add_ablate_command(probe) : add_analyze_command(probe);
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  if (work == SlurmWork::Sweep) reversed.insert(reversed.begin(), "--all");
  reversed.push_back(command);
  try {
    probe.parse(reversed);
  } catch (const CLI::ParseError& e) {
    throw UsageError("the options for " + command + ": " + e.what());
  }
  const auto model = task.app->get_option("MODEL")->as<std::string>();
  io::require_regular_file(model);
  if (work == SlurmWork::Sweep) {  // what would make every task fail, refused before submitting
    if (task.app->get_option("--recompute")->count() > 0)
      throw UsageError("--recompute: each sweep task computes its experts anyway");
    if (task.app->get_option("--mode")->as<int64_t>() != 0)
      throw UsageError("a backbone layer or GPT block is swept in its first expert mode (--mode 0)");
    analysis::SessionOptions session;
    session.model_path = model;
    session.layer = task.app->get_option("--layer")->as<std::string>();
    if (!analysis::is_gpt_model_file(model) && !analysis::names_vit_block(session))
      throw UsageError("`slurm sweep` splits the sweep of a layer inside a ViT or MLP-Mixer (--layer blocks.L.mlp, …) "
                       "or of a GPT block; a head's sweep takes seconds once extracted: use `slurm analyze`");
  }
  return model;
}

// Runs `sbatch --parsable ARGS SCRIPT` and returns the job id it prints ("123" or "123;cluster").
std::string submit(const std::string& sbatch_args, const std::string& script) {
  const auto command = "sbatch --parsable " + sbatch_args + shell_quote(script) + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(command.c_str(), "r"), ::pclose);
  if (!pipe) throw Error("cannot run sbatch");
  std::string output;
  std::array<char, 256> buffer{};
  while (std::fgets(buffer.data(), buffer.size(), pipe.get())) output += buffer.data();
  const int status = ::pclose(pipe.release());
  while (!output.empty() && (output.back() == '\n' || output.back() == '\r')) output.pop_back();
  // --parsable prints the id last ("123" or "123;cluster"); warnings or a site's job_submit
  // messages may come before it on stderr.
  const auto line = output.substr(output.find_last_of('\n') == std::string::npos ? 0 : output.find_last_of('\n') + 1);
  const auto id = line.substr(0, line.find(';'));
  if (status != 0 || id.empty() || id.find_first_not_of("0123456789_") != std::string::npos) {
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
      throw Error("sbatch was not found: submit from a Slurm login node (--dry-run prints the scripts)");
    throw Error("sbatch refused " + script + ": " + output);
  }
  return id;
}

int run_slurm(SlurmWork work, const SlurmOptions& o, std::vector<std::string> task_args) {
  const bool sweep = work == SlurmWork::Sweep;
  if (o.shards < 2)
    throw UsageError(std::string("--shards must be at least 2 (one task is `mumoe ") +
                     (sweep ? "ablate --all" : "analyze") + "` itself)");
  SlurmRequest r;
  r.work = work;
  // The array's script adds --all itself.
  if (sweep) task_args.erase(std::remove(task_args.begin(), task_args.end(), "--all"), task_args.end());
  r.task_args = task_args;
  const auto model = check_task_args(work, task_args);
  r.program = this_program();
  r.submit_dir = std::filesystem::current_path().string();
  r.shards = o.shards;
  r.partition = o.partition;
  r.time = o.time;
  r.cpus = o.cpus;
  r.gpus = o.gpus;
  r.cache = std::filesystem::absolute(o.cache.empty() ? cache::default_cache_path() : o.cache).string();
  if (o.work_dir.empty()) {
    const auto now = std::time(nullptr);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::gmtime(&now));
    r.work_dir = (std::filesystem::current_path() / ("mumoe-slurm-" + std::string(stamp))).string();
  } else {
    r.work_dir = std::filesystem::absolute(o.work_dir).lexically_normal().string();
    while (r.work_dir.size() > 1 && r.work_dir.back() == '/') r.work_dir.pop_back();
  }
  // sbatch splits #SBATCH lines at blanks, treats quotes, backslashes and '#' itself, and expands
  // '%' in --output: such paths cannot be written there faithfully.
  for (const auto& [path, what] : {std::pair{r.submit_dir, "the current directory"}, std::pair{r.work_dir, "--work-dir"}})
    if (path.find_first_of(" \t\n\r\"'\\#%") != std::string::npos)
      throw UsageError(what + std::string(" (") + path +
                       ") holds a blank, quote, backslash, '#' or '%', which #SBATCH lines cannot carry; use another");
  // The target is only in the scripts' shell-quoted command and a comment line: a line break
  // would end the comment.
  if (r.cache.find_first_of("\n\r") != std::string::npos) throw UsageError("--cache holds a line break");
  const auto array = array_script(r), merge = merge_script(r);
  const auto array_path = r.work_dir + "/" + array_script_name(r), merge_path = r.work_dir + "/merge.sbatch";
  if (o.dry_run) {
    std::cout << "# " << array_path << "\n" << array << "\n# " << merge_path << "\n" << merge;
    return kSuccess;
  }
  std::filesystem::create_directories(r.work_dir + "/logs");
  for (const auto& [path, text] : {std::pair{array_path, array}, std::pair{merge_path, merge}}) {
    io::AtomicFileWriter out(path);
    out.write(text.data(), text.size());
    out.commit();
  }
  const auto array_job = submit("", array_path);
  std::string merge_job;
  try {
    merge_job = submit("--dependency=afterok:" + array_job + " --kill-on-invalid-dep=yes ", merge_path);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " (job array " + array_job + " is queued; submit " + merge_path +
                " once it is done)");
  }
  if (o.json) {
    std::cout << json_text(nlohmann::json({{"model", model},
                                           {"work_dir", r.work_dir},
                                           {sweep ? "sweep_job" : "analyze_job", array_job},
                                           {"merge_job", merge_job},
                                           {"shards", r.shards},
                                           {"cache", r.cache}}))
              << "\n";
  } else {
    std::cout << "submitted job array " << array_job << " (" << r.shards << " tasks) and merge job " << merge_job
              << " into " << r.cache << "\n"
              << "  scripts and logs: " << r.work_dir << "\n"
              << "  a failed task: sbatch --array=K " << array_path << ", then sbatch " << merge_path << "\n";
  }
  return kSuccess;
}

}  // namespace

Command add_slurm_command(CLI::App& parent) {
  auto o = std::make_shared<SlurmOptions>();
  auto* app = parent.add_subcommand("slurm", "Run an analysis on a Slurm cluster as a job array of shards");
  app->require_subcommand(1);
  auto* analyze = app->add_subcommand(
      "analyze", "Submit `mumoe analyze MODEL [its options]` as N shard tasks and a merge job into --cache");
  auto* sweep = app->add_subcommand(
      "sweep", "Submit `mumoe ablate --all MODEL [its options]` (a layer inside a ViT or MLP-Mixer, or a GPT block) as "
               "N shard tasks and a merge job into --cache");
  for (auto* sub : {analyze, sweep}) {
    sub->allow_extras();
    sub->add_option("--shards", o->shards, "N: tasks of the job array, one shard each")->required();
    sub->add_option("--partition", o->partition, "Slurm partition (default: the cluster's)");
    sub->add_option("--time", o->time, "Time limit per task, e.g. 2:00:00 (default: the partition's)");
    sub->add_option("--cpus", o->cpus, "CPUs per task (default: the cluster's)")->check(CLI::PositiveNumber);
    sub->add_option("--gpus", o->gpus, "GPUs per task (--gres=gpu:G; pass --device cuda to the task)")
        ->check(CLI::PositiveNumber);
    sub->add_option("--work-dir", o->work_dir,
                    "Where the scripts, logs and shard caches go (default ./mumoe-slurm-DATE-TIME)");
    sub->add_option("--cache", o->cache,
                    "The cache the merge job writes (default $MUMOE_CACHE, else ~/.cache/mumoe-studio/analysis.sqlite)");
    sub->add_flag("--dry-run", o->dry_run, "Print the two scripts; submit nothing");
    add_json_flag(sub, o->json);
  }
  analyze->footer("Everything else is passed to `mumoe analyze` (MODEL --data SPEC --layer …).");
  sweep->footer("Everything else is passed to `mumoe ablate --all` (MODEL --data SPEC --layer blocks.L.mlp …).");
  return {app, [o, app, analyze, sweep]() {
            if (app->got_subcommand(sweep)) return run_slurm(SlurmWork::Sweep, *o, sweep->remaining());
            return run_slurm(SlurmWork::Analyze, *o, analyze->remaining());
          }};
}

}  // namespace mumoe::cli
