// mumoe cache check|repair [--cache FILE] [--json]: reads every row of an analysis cache and
// lists what is damaged (chunks that do not match their run, runs marked complete with chunks
// missing, unreadable run rows, results that are not JSON); `repair` drops exactly those, so the
// next analysis recomputes them and everything sound is kept (core/cache/cache_repair.h).
// Exit 0 when the cache is sound (check) or was repaired (repair), 2 when check found damage.
// mumoe cache merge SHARD… --into CACHE: joins the caches of `analyze --shard K/N` tasks into one
// (core/cache/cache_merge.h), or the parts of `ablate --all --shard K/N` tasks into one sweep
// answer (core/analysis/sweep_shards.h; chosen by what the first shard holds); a missing,
// duplicated, foreign or damaged shard is exit 2, naming the file (and chunks or experts), and the
// target is left as it was.
#include <nlohmann/json.hpp>

#include <iostream>
#include <vector>

#include "cache/analysis_cache.h"
#include "cache/cache_merge.h"
#include "cache/cache_repair.h"
#include "analysis/sweep_shards.h"
#include "analysis_options.h"
#include "cli_support.h"
#include "io/errors.h"
#include "io/file_checks.h"

namespace mumoe::cli {
namespace {

struct CacheOptions {
  std::string cache;
  bool json = false;
  std::vector<std::string> shards;  ///< merge: the shard caches
  std::string into;                 ///< merge: the target
  bool quiet = false;
};

// What both merges report in JSON: where the run went and what it is.
nlohmann::json merged_run_json(const CacheOptions& o, const cache::RunKey& key, int64_t run_id, int64_t shards) {
  return {{"cache", o.into}, {"run_id", run_id},        {"model", key.model_path},
          {"data", key.data_identity}, {"layer", key.layer}, {"shards", shards}};
}

// The parts of a sharded sweep (ablate --all --shard K/N) joined into one answer.
int run_sweep_merge(const CacheOptions& o) {
  const auto report = analysis::merge_sweep_shards(o.shards, o.into);
  if (!report.target_note.empty()) std::cerr << "mumoe: warning: " << report.target_note << "\n";
  if (o.json) {
    auto j = merged_run_json(o, report.key, report.run_id, report.shards);
    j["sweep"] = report.answer_kind + " " + report.answer_key;
    j["experts"] = report.experts;
    std::cout << json_text(j) << "\n";
  } else {
    std::cout << "merged " << report.shards << " sweep shards of " << io::printable(report.key.model_path) << " on "
              << io::printable(report.key.data_identity) << ", layer '" << io::printable(report.key.layer)
              << "' into " << o.into << " (run " << report.run_id << "): the sweep of " << report.experts
              << " experts (" << report.answer_key << ")\n";
  }
  return kSuccess;
}

int run_merge(const CacheOptions& o) {
  catch_interrupts();
  cache::check_shard_paths(o.shards, o.into);  // before any file is opened
  if (analysis::holds_sweep_part(o.shards.front())) return run_sweep_merge(o);
  const auto report =
      cache::merge_shards(o.shards, o.into, progress_reporter("merging (reading, then writing)", o.quiet || o.json));
  if (!report.target_note.empty()) std::cerr << "mumoe: warning: " << report.target_note << "\n";
  if (o.json) {
    auto j = merged_run_json(o, report.key, report.run_id, report.shards);
    j["chunks"] = report.chunks;
    j["chunks_copied"] = report.chunks_copied;
    j["chunks_kept"] = report.chunks_kept;
    std::cout << json_text(j) << "\n";
  } else {
    std::cout << "merged " << report.shards << " shards of " << io::printable(report.key.model_path) << " on "
              << io::printable(report.key.data_identity) << ", layer '" << io::printable(report.key.layer) << "' into "
              << o.into << " (run " << report.run_id << "): " << report.chunks_copied << " chunks copied, "
              << report.chunks_kept << " there already, " << report.chunks << " in all\n";
  }
  return kSuccess;
}

int run_cache(const CacheOptions& o, bool repair) {
  const std::string path = o.cache.empty() ? cache::default_cache_path() : o.cache;
  // Checking must not create a cache where there is none (a mistyped path).
  io::require_regular_file(path);
  cache::CacheOpenReport opened;
  auto cache = cache::AnalysisCache::open(path, &opened);
  const auto report = cache::check_cache(*cache, repair);
  if (o.json) {
    nlohmann::json problems = nlohmann::json::array();
    for (const auto& p : report.problems)
      problems.push_back({{"run", p.run_id}, {"where", p.where}, {"problem", p.problem}, {"action", p.action}});
    nlohmann::json j = {{"cache", path},        {"runs", report.runs},         {"chunks", report.chunks},
                        {"results", report.results}, {"sound", report.sound()}, {"repaired", repair},
                        {"problems", problems}};
    if (opened.set_aside) j["set_aside"] = {{"path", opened.set_aside_path}, {"reason", opened.set_aside_reason}};
    std::cout << json_text(j) << "\n";
  } else {
    if (opened.set_aside)
      std::cout << "the file was unusable as a whole (" << opened.set_aside_reason << "): moved to "
                << opened.set_aside_path << ", a new cache was started\n";
    std::cout << path << ": " << report.runs << " runs, " << report.chunks << " chunks, " << report.results
              << " results read; ";
    if (report.sound()) {
      std::cout << "no damage found\n";
    } else {
      std::cout << report.problems.size() << " damaged part(s)" << (repair ? ", repaired" : "") << "\n";
      for (const auto& p : report.problems)
        std::cout << "  run " << p.run_id << ", " << io::printable(p.where) << ": " << p.problem
                  << (p.action.empty() ? "" : " — " + p.action) << "\n";
      if (!repair) std::cout << "run `mumoe cache repair --cache " << path << "` to drop them; the rest is kept\n";
    }
  }
  return report.sound() || repair ? kSuccess : kBadInput;
}

}  // namespace

Command add_cache_command(CLI::App& parent) {
  auto o = std::make_shared<CacheOptions>();
  auto* app = parent.add_subcommand("cache", "Check, repair or merge analysis caches");
  app->require_subcommand(1);
  for (const bool repair : {false, true}) {
    auto* sub = app->add_subcommand(repair ? "repair" : "check",
                                    repair ? "Drop the damaged parts of the cache (the rest is kept)"
                                           : "List the damaged parts of the cache (exit 2 when there are any)");
    sub->add_option("--cache", o->cache,
                    "Analysis cache file (default $MUMOE_CACHE, else ~/.cache/mumoe-studio/analysis.sqlite)");
    add_json_flag(sub, o->json);
  }
  auto* merge = app->add_subcommand("merge", "Join the caches of `analyze --shard K/N` (or `ablate --all --shard K/N`) tasks into one cache");
  merge->add_option("SHARDS", o->shards, "The shards' cache files (one per shard)")->required();
  merge->add_option("--into", o->into, "The cache to merge into (created when absent; chunks it has are kept)")
      ->required();
  add_json_flag(merge, o->json);
  add_quiet_flag(merge, o->quiet);
  return {app, [o, app, merge]() {
            if (app->got_subcommand(merge)) return run_merge(*o);
            return run_cache(*o, app->got_subcommand("repair"));
          }};
}

}  // namespace mumoe::cli
