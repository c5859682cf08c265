#include "slurm_jobs.h"

#include <sstream>

namespace mumoe::cli {
namespace {

// The #SBATCH lines both jobs share: where they run, the resources asked for.
void common_directives(std::ostringstream& out, const SlurmRequest& r) {
  out << "#SBATCH --chdir=" << r.submit_dir << "\n";
  if (!r.partition.empty()) out << "#SBATCH --partition=" << r.partition << "\n";
  if (!r.time.empty()) out << "#SBATCH --time=" << r.time << "\n";
}

}  // namespace

std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (const char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string shard_cache_path(const SlurmRequest& request, int64_t shard) {
  return request.work_dir + "/shard-" + std::to_string(shard) + ".sqlite";
}

std::string array_script_name(const SlurmRequest& r) {
  return r.work == SlurmWork::Sweep ? "sweep.sbatch" : "analyze.sbatch";
}

std::string array_script(const SlurmRequest& r) {
  const bool sweep = r.work == SlurmWork::Sweep;
  const std::string kind = sweep ? "sweep" : "analyze";
  std::ostringstream out;
  out << "#!/bin/bash\n";
  if (sweep)
    out << "# mumoe ablate --all in " << r.shards << " shards: task K removes shard K/" << r.shards
        << " of the layer's experts in turn into a cache of its own.\n";
  else
    out << "# mumoe analyze in " << r.shards << " shards: task K extracts shard K/" << r.shards
        << " of the run's chunks into a cache of its own.\n";
  out << "# Resubmit failed tasks alone: sbatch --array=3,7 " << r.work_dir << "/" << array_script_name(r) << "\n"
      << "#SBATCH --job-name=" << r.job_name << "-" << kind << "\n"
      << "#SBATCH --array=0-" << r.shards - 1 << "\n"
      << "#SBATCH --output=" << r.work_dir << "/logs/" << kind << "-%A_%a.out\n";
  common_directives(out, r);
  if (r.cpus > 0) out << "#SBATCH --cpus-per-task=" << r.cpus << "\n";
  if (r.gpus > 0) out << "#SBATCH --gres=gpu:" << r.gpus << "\n";
  out << "set -euo pipefail\n";
  // LibTorch's threads follow the CPUs Slurm gave the task, not the node's.
  if (r.cpus > 0) out << "export OMP_NUM_THREADS=" << r.cpus << "\n";
  out << "exec " << shell_quote(r.program) << (sweep ? " ablate" : " analyze");
  for (const auto& arg : r.task_args) out << " " << shell_quote(arg);
  if (sweep) out << " --all";
  out << " --shard \"${SLURM_ARRAY_TASK_ID}/" << r.shards << "\" --cache " << shell_quote(r.work_dir)
      << "\"/shard-${SLURM_ARRAY_TASK_ID}.sqlite\" --quiet\n";
  return out.str();
}

std::string merge_script(const SlurmRequest& r) {
  std::ostringstream out;
  out << "#!/bin/bash\n"
      << "# Joins the " << r.shards << " shards' caches into " << r.cache
      << "; a missing or unfinished shard is named (exit 2) and the target is left as it was.\n"
      << "#SBATCH --job-name=" << r.job_name << "-merge\n"
      << "#SBATCH --output=" << r.work_dir << "/logs/merge-%j.out\n";
  common_directives(out, r);
  out << "set -euo pipefail\n"
      << "exec " << shell_quote(r.program) << " cache merge";
  for (int64_t k = 0; k < r.shards; ++k) out << " " << shell_quote(shard_cache_path(r, k));
  out << " --into " << shell_quote(r.cache) << " --quiet\n";
  return out.str();
}

}  // namespace mumoe::cli
