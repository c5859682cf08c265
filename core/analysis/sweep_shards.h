// Sweeps in shards: the slow sweeps — every expert of a μMoE or router layer inside a ViT or
// MLP-Mixer backbone, or of a GPT's block, removed in turn — split by experts across tasks
// (`mumoe ablate --all --shard K/N --cache shard-K.sqlite`, one cache file per task for the reason
// cache/cache_merge.h gives) and merged into one ordinary cache, where the whole sweep is an
// answer like any other: `ablate --all` and the GUI's sweep then read it at once.
//
// A sweep shard's cache holds the analysis's run (its full key and shapes; no chunks are needed)
// with one result of kind kSweepPartKind: shard K's experts [⌊KE/N⌋, ⌊(K+1)E/N⌋) as the answer's
// own JSON restricted to them (a SweepOutcome, or a GPT's LmAblationReport with its baseline),
// with the whole answer's kind and key, K/N and E. merge_sweep_shards refuses, naming the file,
// and leaves the target as it was when:
//   * a file is missing, is not a cache, or holds no sweep part or two;
//   * the parts are of different runs (model content, data, layer, options, shapes), answers
//     (method, mode), splits (N) or expert counts (also against the run's layer), or a GPT
//     block's parts have different baselines;
//   * a shard K is missing or given twice;
//   * a part is damaged: not decodable, or not exactly its range's experts in order;
//   * the target holds the run with other shapes.
// Then the whole answer — the parts' experts in order, summarised again — is written into the
// target's run (created when absent) in one statement. The sweep's numbers are those of one
// whole run: each expert's removal is computed alone, whichever task computes it.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/ablation_results.h"
#include "cache/analysis_cache.h"

namespace mumoe::analysis {

/// The result kind a sweep shard stores its part under (key "ANSWER_KIND|ANSWER_KEY|K/N").
inline constexpr const char* kSweepPartKind = "sweep-part";

/// The cached answer key of an image classifier layer's sweep of `mode` by `method` (kind
/// "sweep"): "mode0:sparse".
std::string sweep_answer_key(int64_t mode, AblationMethod method);

/// Shard k of n's experts: [⌊kE/n⌋, ⌊(k+1)E/n⌋). UsageError when k ∉ [0, n) or n > E (a shard
/// would hold no expert).
ExpertRange shard_experts(int64_t experts, int64_t k, int64_t n);

/// Stores shard (k, n)'s part of the sweep answer (answer_kind, answer_key) of run `run_id`;
/// `part` is the answer's JSON over the shard's experts (to_json of a SweepOutcome or an
/// LmAblationReport), `experts` the layer's expert count E.
void put_sweep_part(cache::AnalysisCache& cache, int64_t run_id, const std::string& answer_kind,
                    const std::string& answer_key, int64_t k, int64_t n, int64_t experts, const nlohmann::json& part);

/// True when the regular file `path` is an analysis cache holding a sweep part (`mumoe cache
/// merge` then merges sweeps rather than extraction shards); false otherwise, a missing file
/// included. Opens the cache as every command does.
bool holds_sweep_part(const std::string& path);

struct SweepMergeReport {
  cache::RunKey key;           ///< the run the answer belongs to
  int64_t run_id = 0;          ///< its id in the target
  std::string answer_kind;     ///< "sweep" (an image classifier's layer) or "lm-sweep" (a GPT block)
  std::string answer_key;      ///< e.g. "mode0:sparse", "sparse"
  int64_t shards = 0;          ///< N
  int64_t experts = 0;         ///< E
  std::string target_note;     ///< what opening the target did (cache::opening_note), "" when nothing
};

/// Merges the sweep shards' parts into one answer in the cache at `target_path` (created when
/// absent, and only once every part is checked). Throws FileError naming the file for bad parts
/// or sets (above), UsageError for no shard or a target among the shards. An answer the target
/// already holds is replaced by the merged one.
SweepMergeReport merge_sweep_shards(const std::vector<std::string>& shard_paths, const std::string& target_path);

}  // namespace mumoe::analysis
