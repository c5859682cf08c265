// The Slurm job scripts of `mumoe slurm analyze` and `mumoe slurm sweep`: a job array whose task
// K runs `mumoe analyze … --shard K/N` (or `mumoe ablate … --all --shard K/N`) into a cache file of
// its own, and a merge job (submitted with --dependency=afterok on the array) that joins the
// shards into one cache (cache/cache_merge.h, analysis/sweep_shards.h).
// Plain text generation, no Slurm needed: `--dry-run` prints these, tests read them.
//
// Why one cache file per task: SQLite's locking is unreliable on network file systems (its
// documentation, "How To Corrupt An SQLite Database File", §2), which is where a cluster's
// shared storage usually is; so no two tasks ever write one file, and only the merge job writes
// the target.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mumoe::cli {

/// What the array's tasks do: extract a run's chunks, or sweep a layer's experts.
enum class SlurmWork { Analyze, Sweep };

struct SlurmRequest {
  SlurmWork work = SlurmWork::Analyze;
  std::string program;                    ///< the mumoe executable, absolute
  std::string submit_dir;                 ///< where the tasks run (--chdir): relative data paths
  std::string work_dir;                   ///< absolute: shards, logs and the scripts themselves
  std::vector<std::string> task_args;     ///< MODEL and `analyze`'s (`ablate`'s) options, passed on verbatim
  std::string cache;                      ///< the merge's target
  int64_t shards = 0;                     ///< N ≥ 1
  std::string partition, time, job_name = "mumoe";
  int64_t cpus = 0, gpus = 0;             ///< 0: the cluster's default
};

/// POSIX shell single-quoting: 'it'\''s'.
std::string shell_quote(const std::string& text);
/// The cache file of shard K: WORK_DIR/shard-K.sqlite.
std::string shard_cache_path(const SlurmRequest& request, int64_t shard);
/// The job-array script's file name in the work directory: analyze.sbatch or sweep.sbatch.
std::string array_script_name(const SlurmRequest& request);
/// The job-array script (#SBATCH --array=0-(N-1)); task K extracts (sweeps) shard K/N.
std::string array_script(const SlurmRequest& request);
/// The merge job's script: `mumoe cache merge` of every shard's file into the target.
std::string merge_script(const SlurmRequest& request);

}  // namespace mumoe::cli
