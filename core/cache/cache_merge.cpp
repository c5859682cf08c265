#include "cache/cache_merge.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>

#include "io/errors.h"
#include "io/file_checks.h"

namespace mumoe::cache {
namespace {

constexpr const char* kShardKind = "shard";  // analysis/chunked_run.h, kShardResultKind

struct ShardFile {
  std::string path;
  std::unique_ptr<AnalysisCache> cache;
  int64_t run_id = 0;
  int64_t index = 0, count = 0;
  std::set<int64_t> chunks;
};

std::string chunk_range(int64_t first, int64_t end) {
  return end - first == 1 ? "chunk " + std::to_string(first)
                          : "chunks " + std::to_string(first) + "–" + std::to_string(end - 1);
}

ShardFile open_shard(const std::string& path) {
  io::require_regular_file(path);
  ShardFile s;
  s.path = path;
  CacheOpenReport report;
  s.cache = AnalysisCache::open(path, &report);
  if (report.set_aside)
    throw FileError(path, "is not a sound analysis cache (" + report.set_aside_reason + "; it was moved to " +
                              report.set_aside_path + "): resubmit its task");
  const auto runs = s.cache->run_ids();
  if (runs.size() != 1)
    throw FileError(path, "holds " + std::to_string(runs.size()) +
                              " runs; a shard's cache holds the one run of its task (mumoe analyze --shard K/N)");
  s.run_id = runs.front();
  for (const auto& [kind, key] : s.cache->result_keys(s.run_id)) {
    if (kind != kShardKind) continue;
    const auto shard = parse_shard(key);
    if (!shard) throw FileError(path, "its shard marker '" + key + "' is not K/N");
    if (s.count) throw FileError(path, "is marked as two shards (" + std::to_string(s.index) + "/" +
                                           std::to_string(s.count) + " and " + key + ")");
    std::tie(s.index, s.count) = *shard;
  }
  if (!s.count) throw FileError(path, "holds a run that is not a shard's (it was not made with --shard K/N)");
  const auto chunks = s.cache->chunk_indices(s.run_id);
  s.chunks.insert(chunks.begin(), chunks.end());
  return s;
}

}  // namespace

std::string run_difference(const RunKey& a, const RunKey& b, const RunInfo& x, const RunInfo& y) {
  if (a.model_hash != b.model_hash) return "another model (content " + a.model_hash.substr(0, 12) + "…, not " +
                                           b.model_hash.substr(0, 12) + "…)";
  if (a.data_identity != b.data_identity) return "other data (" + a.data_identity + ", not " + b.data_identity + ")";
  if (a.data_hash != b.data_hash) return "other data content under the same name " + a.data_identity;
  if (a.layer != b.layer) return "another layer (" + a.layer + ", not " + b.layer + ")";
  if (a.parameters != b.parameters) return "other options (" + a.parameters + ", not " + b.parameters + ")";
  if (x.sample_count != y.sample_count || x.chunk_size != y.chunk_size || x.input_dim != y.input_dim ||
      x.output_dim != y.output_dim || x.expert_dims != y.expert_dims || x.attribute_count != y.attribute_count)
    return "other shapes (" + std::to_string(x.sample_count) + " samples in chunks of " + std::to_string(x.chunk_size) +
           ", not " + std::to_string(y.sample_count) + " in chunks of " + std::to_string(y.chunk_size) + ")";
  return "";
}

std::optional<std::pair<int64_t, int64_t>> parse_shard(const std::string& key) {
  const auto slash = key.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == key.size()) return std::nullopt;
  try {
    size_t used = 0;
    const auto k = std::stoll(key.substr(0, slash), &used);
    if (used != slash) return std::nullopt;
    const auto n = std::stoll(key.substr(slash + 1), &used);
    if (used != key.size() - slash - 1 || n < 1 || k < 0 || k >= n) return std::nullopt;
    return std::make_pair(k, n);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void check_shard_paths(const std::vector<std::string>& shard_paths, const std::string& target_path) {
  if (shard_paths.empty()) throw UsageError("no shard caches to merge");
  for (const auto& path : shard_paths)
    if (io::same_file(path, target_path))
      throw UsageError("the target " + target_path + " is one of the shards (" + path + "); merge into a new file");
  for (size_t i = 0; i < shard_paths.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (shard_paths[i] == shard_paths[j] || io::same_file(shard_paths[i], shard_paths[j]))
        throw FileError(shard_paths[i], "is given twice (also as " + shard_paths[j] + ")");
}

MergeReport merge_shards(const std::vector<std::string>& shard_paths, const std::string& target_path,
                         const std::function<bool(int64_t, int64_t)>& progress) {
  check_shard_paths(shard_paths, target_path);

  // 1. Every shard: one run, one marker, all of the same run and split, each K once.
  std::vector<ShardFile> shards;
  for (const auto& path : shard_paths) shards.push_back(open_shard(path));
  const auto& first = shards.front();
  const auto key = first.cache->run_key(first.run_id);
  const auto info = first.cache->run_info(first.run_id);
  const int64_t n = first.count, chunks = info.chunk_count();
  std::map<int64_t, const ShardFile*> by_index;
  for (const auto& s : shards) {
    const auto differs = run_difference(s.cache->run_key(s.run_id), key, s.cache->run_info(s.run_id), info);
    if (!differs.empty())
      throw FileError(s.path, "is a shard of another run than " + first.path + ": " + differs);
    if (s.count != n)
      throw FileError(s.path, "is shard " + std::to_string(s.index) + "/" + std::to_string(s.count) + ", but " +
                                  first.path + " is of a split into " + std::to_string(n));
    if (auto [it, added] = by_index.emplace(s.index, &s); !added)
      throw FileError(s.path, "is shard " + std::to_string(s.index) + "/" + std::to_string(n) + ", as is " +
                                  it->second->path + ": give each shard once");
  }

  // 2. The target: the run with the same shapes, or none yet.
  // An absent target is created only once everything is checked: a refused merge leaves no file.
  const bool target_exists = io::regular_file_exists(target_path);  // refuses a directory, FIFO or device
  CacheOpenReport target_report;
  std::unique_ptr<AnalysisCache> target;
  if (target_exists) target = AnalysisCache::open(target_path, &target_report);
  std::set<int64_t> kept;
  std::optional<int64_t> existing;
  if (target) existing = target->find_run(key);
  if (existing) {
    if (const auto differs = run_difference(target->run_key(*existing), key, target->run_info(*existing), info);
        !differs.empty())
      throw FileError(target_path, "holds this run with " + differs + "; merge into another file");
    const auto present = target->chunk_indices(*existing);
    kept.insert(present.begin(), present.end());
  }

  // 3. Every chunk exactly once, from the shard whose range holds it.
  // Shard k holds [⌊kC/N⌋, ⌊(k+1)C/N⌋); chunk c is shard ⌊((c+1)N − 1)/C⌋'s.
  const auto owner_of = [&](int64_t c) { return ((c + 1) * n - 1) / chunks; };
  for (const auto& s : shards)
    for (const int64_t c : s.chunks) {
      if (c < 0 || c >= chunks) throw FileError(s.path, "holds chunk " + std::to_string(c) + " of a run of " +
                                                            std::to_string(chunks) + " chunks");
      if (owner_of(c) != s.index) {
        const auto owner = by_index.find(owner_of(c));
        throw FileError(s.path, "holds chunk " + std::to_string(c) + ", which is shard " + std::to_string(owner_of(c)) +
                                    "'s" + (owner != by_index.end() ? " (" + owner->second->path + ")" : std::string()) +
                                    ": a chunk must come from one file");
      }
    }
  std::vector<std::pair<int64_t, const ShardFile*>> copies;  // (chunk, from)
  for (int64_t k = 0; k < n; ++k) {
    const int64_t begin = k * chunks / n, end = (k + 1) * chunks / n;
    const auto found = by_index.find(k);
    if (found == by_index.end()) {
      bool target_has_all = true;  // (an absent target has nothing)
      for (int64_t c = begin; c < end; ++c) target_has_all = target_has_all && kept.count(c);
      if (!target_has_all)
        throw FileError(target_path, "cannot be completed: shard " + std::to_string(k) + "/" + std::to_string(n) + " (" +
                                         chunk_range(begin, end) + ") is not among the " +
                                         std::to_string(shards.size()) + " files given");
      continue;
    }
    const auto& s = *found->second;
    std::vector<int64_t> missing;
    for (int64_t c = begin; c < end; ++c) {
      if (kept.count(c)) continue;
      if (s.chunks.count(c)) copies.push_back({c, &s});
      else missing.push_back(c);
    }
    if (!missing.empty())
      throw FileError(s.path, "lacks " + chunk_range(missing.front(), missing.back() + 1) + " of shard " +
                                  std::to_string(k) + "/" + std::to_string(n) + " (" + std::to_string(missing.size()) +
                                  " missing): its task did not finish; resubmit it");
  }

  // 4. Read every chunk to copy (a damaged one is refused before the target is touched), then
  //    copy them in one transaction.
  const auto total = static_cast<int64_t>(copies.size()) * 2;
  int64_t done = 0;
  const auto step = [&] {
    ++done;
    if (progress && !progress(done, total)) throw Cancelled();
  };
  for (const auto& [c, from] : copies) {
    try {
      from->cache->get_chunk(from->run_id, c);
    } catch (const FileError& e) {
      throw FileError(from->path, "chunk " + std::to_string(c) + " is damaged (" + e.problem() +
                                      "): resubmit its task");
    }
    step();
  }
  if (!target) target = AnalysisCache::open(target_path, &target_report);
  MergeReport report;
  report.target_note = opening_note(target_report);
  report.key = key;
  report.shards = n;
  report.chunks = chunks;
  report.chunks_kept = static_cast<int64_t>(kept.size());
  report.run_id = existing ? *existing : target->begin_run(key, info);
  try {
    AnalysisCache::ChunkBatch batch(*target);
    for (const auto& [c, from] : copies) {
      target->put_chunk(report.run_id, from->cache->get_chunk(from->run_id, c));
      step();
    }
    batch.commit();
  } catch (...) {
    if (!existing) target->delete_run(report.run_id);  // the target as it was
    throw;
  }
  report.chunks_copied = static_cast<int64_t>(copies.size());
  target->complete_run(report.run_id);
  return report;
}

}  // namespace mumoe::cache
