#include "cache/cache_repair.h"
#include "io/json_file.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "io/errors.h"

namespace mumoe::cache {
namespace {

void note(CacheCheckReport& report, int64_t run_id, std::string where, std::string problem, bool repair,
          const char* action) {
  report.problems.push_back({run_id, std::move(where), std::move(problem), repair ? action : ""});
}

// Whether the run analyses a model with a backbone: its key's parameters carry the backbone's
// configuration then (analysis/extraction.cpp, make_run_key). Such a run stores its layer's inputs
// in every chunk; a head on features stores none (they are the data's, ChunkRecord::inputs) —
// and a head's run begun before that change holds both kinds, which is sound. Unreadable
// parameters: no judgement (other checks name them).
bool run_has_backbone(const RunKey& key) {
  if (io::json_nesting_depth(key.parameters) > io::kMaxJsonDepth) return false;
  const auto parameters = nlohmann::json::parse(key.parameters, nullptr, /*allow_exceptions=*/false);
  return parameters.is_object() && parameters.contains("backbone");
}

}  // namespace

CacheCheckReport check_run(AnalysisCache& cache, int64_t run_id, bool repair, const ChunkValidator& validate) {
  CacheCheckReport report;
  report.repaired = repair;
  report.runs = 1;
  RunInfo info;
  try {
    info = cache.run_info(run_id);
  } catch (const UsageError&) {
    throw;  // no such run: the caller's mistake
  } catch (const FileError& e) {
    // The run's own row is unreadable: nothing of it can be trusted.
    note(report, run_id, "run", e.problem(), repair, "run deleted; it is extracted again when next asked for");
    if (repair) cache.delete_run(run_id);
    return report;
  }

  const auto present = cache.chunk_indices(run_id);
  std::vector<bool> have(static_cast<size_t>(info.chunk_count()), false);
  const bool must_store_inputs = run_has_backbone(cache.run_key(run_id));
  std::vector<int64_t> without_inputs;  // sound chunks of a backbone's run that store no inputs
  for (const auto index : present) {
    ++report.chunks;
    if (index >= 0 && index < info.chunk_count()) have[static_cast<size_t>(index)] = true;
    std::string problem;
    try {
      const auto chunk = cache.get_chunk(run_id, index);
      if (validate) problem = validate(chunk);
      if (problem.empty() && must_store_inputs && chunk.inputs.empty()) without_inputs.push_back(index);
    } catch (const FileError& e) {
      // get_chunk's problem names the chunk ("run R, chunk C: …"), which the report's `where` does.
      const auto named = "run " + std::to_string(run_id) + ", chunk " + std::to_string(index) + ": ";
      problem = e.problem().rfind(named, 0) == 0 ? e.problem().substr(named.size()) : e.problem();
    }
    if (problem.empty()) continue;
    note(report, run_id, "chunk " + std::to_string(index), problem, repair,
         "chunk deleted; the next extraction recomputes it");
    if (repair) cache.delete_chunk(run_id, index);
  }
  for (const auto index : without_inputs) {
    note(report, run_id, "chunk " + std::to_string(index),
         "stores no layer inputs, which a model with a backbone must store (its layer does not read the data's "
         "features)",
         repair, "chunk deleted; the next extraction recomputes it");
    if (repair) cache.delete_chunk(run_id, index);
  }
  if (cache.run_complete(run_id)) {
    int64_t missing = 0;
    for (const bool h : have) missing += !h;
    if (missing > 0) {
      note(report, run_id, "run",
           "marked complete but " + std::to_string(missing) + " of " + std::to_string(info.chunk_count()) +
               " chunks are missing",
           repair, "marked partial; the next extraction recomputes the missing chunks");
      // Deleting an absent chunk only marks the run partial.
      if (repair)
        for (size_t i = 0; i < have.size(); ++i)
          if (!have[i]) {
            cache.delete_chunk(run_id, static_cast<int64_t>(i));
            break;
          }
    }
  }

  for (const auto& [kind, key] : cache.result_keys(run_id)) {
    ++report.results;
    const auto text = cache.get_result(run_id, kind, key);
    if (text && io::json_nesting_depth(*text) <= io::kMaxJsonDepth && nlohmann::json::accept(*text)) continue;
    note(report, run_id, "result " + kind + "/" + key, "not valid JSON", repair,
         "result deleted; it is recomputed when next asked for");
    if (repair) cache.delete_result(run_id, kind, key);
  }
  return report;
}

CacheCheckReport repair_run_for_recompute(AnalysisCache& cache, int64_t run_id, const ChunkValidator& validate) {
  auto report = check_run(cache, run_id, /*repair=*/true, validate);
  const auto ids = cache.run_ids();  // the run's own row may have been dropped as unreadable
  if (std::find(ids.begin(), ids.end(), run_id) != ids.end()) cache.clear_results(run_id);
  return report;
}

CacheCheckReport check_cache(AnalysisCache& cache, bool repair, const std::function<bool(int64_t, int64_t)>& progress) {
  CacheCheckReport all;
  all.repaired = repair;
  const auto ids = cache.run_ids();
  for (size_t i = 0; i < ids.size(); ++i) {
    const auto one = check_run(cache, ids[i], repair);
    all.runs += one.runs;
    all.chunks += one.chunks;
    all.results += one.results;
    all.problems.insert(all.problems.end(), one.problems.begin(), one.problems.end());
    if (progress && !progress(static_cast<int64_t>(i + 1), static_cast<int64_t>(ids.size()))) throw Cancelled();
  }
  return all;
}

std::string damaged_cache_remedy(const std::string& cache_path) {
  return "the analysis cache is damaged; `mumoe cache repair --cache " + cache_path +
         "` (or --recompute on this command) drops the broken parts and keeps the rest, which the next "
         "analysis completes";
}

FileError damaged_cache_error(const std::string& cache_path, const std::string& problem) {
  return FileError(cache_path, problem + "; " + damaged_cache_remedy(cache_path));
}

}  // namespace mumoe::cache
