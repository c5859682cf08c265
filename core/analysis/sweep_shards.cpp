#include "analysis/sweep_shards.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <tuple>

#include "analysis/lm_ablation_results.h"
#include "analysis/result_json.h"
#include "cache/cache_merge.h"
#include "io/errors.h"
#include "io/file_checks.h"
#include "io/json_file.h"

namespace mumoe::analysis {
namespace {

constexpr const char* kImageSweep = "sweep";  // analysis_session.cpp, layer_analysis.cpp
constexpr const char* kTokenSweep = "lm-sweep";  // text_analysis_session.cpp

std::string expert_range_text(const ExpertRange& r) {
  return r.end - r.begin == 1 ? "expert " + std::to_string(r.begin)
                              : "experts " + std::to_string(r.begin) + "–" + std::to_string(r.end - 1);
}

// One shard's file, its part and the part decoded as the answer's type.
struct PartFile {
  std::string path;
  std::unique_ptr<cache::AnalysisCache> cache;
  int64_t run_id = 0;
  std::string kind, key;
  int64_t k = 0, n = 0, experts = 0;
  nlohmann::json answer;  ///< the part's answer JSON
  ExpertRange range;
};

PartFile open_part(const std::string& path) {
  io::require_regular_file(path);
  PartFile p;
  p.path = path;
  cache::CacheOpenReport report;
  p.cache = cache::AnalysisCache::open(path, &report);
  if (report.set_aside)
    throw FileError(path, "is not a sound analysis cache (" + report.set_aside_reason + "; it was moved to " +
                              report.set_aside_path + "): resubmit its task");
  int parts = 0;
  bool extraction_shard = false;
  for (const auto run : p.cache->run_ids())
    for (const auto& [kind, key] : p.cache->result_keys(run)) {
      extraction_shard = extraction_shard || kind == "shard";
      if (kind != kSweepPartKind) continue;
      if (++parts > 1)
        throw FileError(path, "holds two sweep parts; a sweep shard's cache holds its task's one part "
                              "(mumoe ablate --all --shard K/N)");
      p.run_id = run;
      const auto text = p.cache->get_result(run, kind, key);
      try {
        const auto j = io::parse_bounded_json(text.value_or(""), path, "sweep part " + key);
        p.kind = j.at("answer_kind");
        p.key = j.at("answer_key");
        p.experts = j.at("experts");
        const auto shard = cache::parse_shard(j.at("shard").get<std::string>());
        if (!shard) throw FileError(path, "its sweep part's shard '" + j.at("shard").get<std::string>() + "' is not K/N");
        std::tie(p.k, p.n) = *shard;
        p.answer = j.at("answer");
      } catch (const nlohmann::json::exception& e) {
        throw FileError(path, "its sweep part is damaged (" + std::string(e.what()) + "): resubmit its task");
      }
    }
  if (!parts)
    throw FileError(path, extraction_shard
                              ? "is an extraction shard (mumoe analyze --shard), not a sweep shard: merge the two "
                                "kinds separately"
                              : "holds no sweep part (a sweep shard is made by mumoe ablate --all --shard K/N)");
  if (p.kind != kImageSweep && p.kind != kTokenSweep)
    throw FileError(path, "its sweep part is of an answer this version does not merge ('" + p.kind + "')");
  try {
    p.range = shard_experts(p.experts, p.k, p.n);
  } catch (const UsageError& e) {
    throw FileError(path, std::string("its sweep part does not fit its layer: ") + e.what());
  }
  return p;
}

// The experts of a part's answer, checked to be exactly its range in order; the part decoded.
template <typename Answer, typename ExpertOf>
Answer decode_part(const PartFile& p, Answer (*decode)(const nlohmann::json&), ExpertOf expert_of) {
  Answer a;
  try {
    a = decode(p.answer);
  } catch (const std::exception& e) {
    throw FileError(p.path, "its sweep part is damaged (" + std::string(e.what()) + "): resubmit its task");
  }
  const auto expected = p.range.end - p.range.begin;
  bool fits = static_cast<int64_t>(a.experts.size()) == expected;
  for (int64_t i = 0; fits && i < expected; ++i) {
    const auto& removed = expert_of(a.experts[static_cast<size_t>(i)]);
    fits = removed.size() == 1 && removed[0] == p.range.begin + i;
  }
  if (!fits)
    throw FileError(p.path, "its sweep part does not hold exactly " + expert_range_text(p.range) + " of shard " +
                                std::to_string(p.k) + "/" + std::to_string(p.n) + " in order: resubmit its task");
  return a;
}

// Equal JSON, numbers within 1e-9 relative: a GPT's baseline is a float64 pass through BLAS,
// whose sums may follow the thread count of the task's node.
bool same_json(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.is_number_float() || b.is_number_float()) {
    if (!a.is_number() || !b.is_number()) return false;
    const double x = a.get<double>(), y = b.get<double>();
    return x == y || std::abs(x - y) <= 1e-9 * std::max(std::abs(x), std::abs(y));
  }
  if (a.type() != b.type() || a.size() != b.size()) return false;
  if (a.is_object()) {
    for (auto it = a.begin(); it != a.end(); ++it)
      if (!b.contains(it.key()) || !same_json(it.value(), b.at(it.key()))) return false;
    return true;
  }
  if (a.is_array()) {
    for (size_t i = 0; i < a.size(); ++i)
      if (!same_json(a[i], b[i])) return false;
    return true;
  }
  return a == b;
}

// What every part of one sweep shares: the answer without its experts, summary and timing.
nlohmann::json shared_fields(nlohmann::json answer) {
  for (const auto* field : {"experts", "mean_polysemanticity", "experts_with_effect", "seconds", "compute_seconds"})
    answer.erase(field);
  return answer;
}

// The whole answer from the parts in shard order.
nlohmann::json whole_answer(const std::vector<const PartFile*>& parts) {
  if (parts.front()->kind == kImageSweep) {
    auto whole = decode_part(*parts.front(), &sweep_outcome_from_json, [](const AblationOutcome& o) -> const auto& {
      return o.experts;
    });
    for (size_t i = 1; i < parts.size(); ++i) {
      const auto part = decode_part(*parts[i], &sweep_outcome_from_json,
                                    [](const AblationOutcome& o) -> const auto& { return o.experts; });
      whole.experts.insert(whole.experts.end(), part.experts.begin(), part.experts.end());
      whole.seconds += part.seconds;
    }
    summarise_sweep(whole);
    return to_json(whole);
  }
  const auto expert_of = [](const LmAblationOutcome& o) -> const auto& { return o.outcome.experts; };
  auto whole = decode_part(*parts.front(), &lm_ablation_report_from_json, expert_of);
  for (size_t i = 1; i < parts.size(); ++i) {
    const auto part = decode_part(*parts[i], &lm_ablation_report_from_json, expert_of);
    whole.experts.insert(whole.experts.end(), part.experts.begin(), part.experts.end());
    whole.seconds += part.seconds;
  }
  summarise(whole);
  return to_json(whole);
}

}  // namespace

std::string sweep_answer_key(int64_t mode, AblationMethod method) {
  return "mode" + std::to_string(mode) + ":" + to_string(method);
}

ExpertRange shard_experts(int64_t experts, int64_t k, int64_t n) {
  if (n < 1 || k < 0 || k >= n) throw UsageError("shard " + std::to_string(k) + "/" + std::to_string(n) + " is not K/N with 0 ≤ K < N");
  if (n > experts)
    throw UsageError("a sweep of " + std::to_string(experts) + " experts splits into at most " + std::to_string(experts) +
                     " shards, not " + std::to_string(n));
  return {k * experts / n, (k + 1) * experts / n};
}

void put_sweep_part(cache::AnalysisCache& cache, int64_t run_id, const std::string& answer_kind,
                    const std::string& answer_key, int64_t k, int64_t n, int64_t experts, const nlohmann::json& part) {
  const auto shard = std::to_string(k) + "/" + std::to_string(n);
  cache.put_result(run_id, kSweepPartKind, answer_kind + "|" + answer_key + "|" + shard,
                   nlohmann::json({{"answer_kind", answer_kind},
                                   {"answer_key", answer_key},
                                   {"shard", shard},
                                   {"experts", experts},
                                   {"answer", part}})
                       .dump());
}

bool holds_sweep_part(const std::string& path) {
  if (!io::regular_file_exists(path)) return false;
  cache::CacheOpenReport report;
  const auto cache = cache::AnalysisCache::open(path, &report);
  // A damaged shard is set aside by the opening: say so now, as either merge would.
  if (report.set_aside)
    throw FileError(path, "is not a sound analysis cache (" + report.set_aside_reason + "; it was moved to " +
                              report.set_aside_path + "): resubmit its task");
  for (const auto run : cache->run_ids())
    for (const auto& [kind, key] : cache->result_keys(run))
      if (kind == kSweepPartKind) return true;
  return false;
}

SweepMergeReport merge_sweep_shards(const std::vector<std::string>& shard_paths, const std::string& target_path) {
  cache::check_shard_paths(shard_paths, target_path);

  // 1. Every part: of one run, one answer, one split and expert count; each K once.
  std::vector<PartFile> parts;
  for (const auto& path : shard_paths) parts.push_back(open_part(path));
  const auto& first = parts.front();
  const auto key = first.cache->run_key(first.run_id);
  const auto info = first.cache->run_info(first.run_id);
  const auto shared = shared_fields(first.answer);
  std::map<int64_t, const PartFile*> by_index;
  for (const auto& p : parts) {
    if (const auto differs = cache::run_difference(p.cache->run_key(p.run_id), key, p.cache->run_info(p.run_id), info);
        !differs.empty())
      throw FileError(p.path, "is a sweep shard of another run than " + first.path + ": " + differs);
    if (p.kind != first.kind || p.key != first.key)
      throw FileError(p.path, "is a shard of another sweep (" + p.kind + " " + p.key + ", not " + first.kind + " " +
                                  first.key + " as " + first.path + ")");
    if (info.expert_dims.empty() || p.experts != info.expert_dims.front())
      throw FileError(p.path, "its sweep part is of " + std::to_string(p.experts) + " experts, but its run's layer has " +
                                  (info.expert_dims.empty() ? std::string("none") : std::to_string(info.expert_dims.front())));
    if (p.n != first.n || p.experts != first.experts)
      throw FileError(p.path, "is shard " + std::to_string(p.k) + "/" + std::to_string(p.n) + " of " +
                                  std::to_string(p.experts) + " experts, but " + first.path + " is of a split into " +
                                  std::to_string(first.n) + " of " + std::to_string(first.experts));
    if (!same_json(shared_fields(p.answer), shared))
      throw FileError(p.path, "its sweep part's shared fields (mode and method; a GPT's baseline) differ from " +
                                  first.path + "'s: they are not parts of one sweep");
    if (auto [it, added] = by_index.emplace(p.k, &p); !added)
      throw FileError(p.path, "is shard " + std::to_string(p.k) + "/" + std::to_string(p.n) + ", as is " +
                                  it->second->path + ": give each shard once");
  }
  std::vector<const PartFile*> ordered;
  for (int64_t k = 0; k < first.n; ++k) {
    const auto found = by_index.find(k);
    if (found == by_index.end())
      throw FileError(target_path, "cannot be completed: sweep shard " + std::to_string(k) + "/" +
                                       std::to_string(first.n) + " (" +
                                       expert_range_text(shard_experts(first.experts, k, first.n)) +
                                       ") is not among the " + std::to_string(parts.size()) + " files given");
    ordered.push_back(found->second);
  }
  const auto whole = whole_answer(ordered).dump();  // decodes and checks every part

  // 2. The target: the run with the same shapes, or none yet (created only now).
  const bool target_exists = io::regular_file_exists(target_path);  // refuses a directory, FIFO or device
  cache::CacheOpenReport target_report;
  std::unique_ptr<cache::AnalysisCache> target;
  std::optional<int64_t> existing;
  if (target_exists) {
    target = cache::AnalysisCache::open(target_path, &target_report);
    existing = target->find_run(key);
    if (existing)
      if (const auto differs = cache::run_difference(target->run_key(*existing), key, target->run_info(*existing), info);
          !differs.empty())
        throw FileError(target_path, "holds this run with " + differs + "; merge into another file");
  }
  if (!target) target = cache::AnalysisCache::open(target_path, &target_report);
  // (Should writing fail below, a target created here stays an empty cache; an existing one keeps
  // everything it held.)
  SweepMergeReport report;
  report.key = key;
  report.answer_kind = first.kind;
  report.answer_key = first.key;
  report.shards = first.n;
  report.experts = first.experts;
  report.target_note = cache::opening_note(target_report);
  report.run_id = existing ? *existing : target->begin_run(key, info);
  try {
    target->put_result(report.run_id, first.kind, first.key, whole);
  } catch (...) {
    if (!existing) target->delete_run(report.run_id);  // the target as it was
    throw;
  }
  return report;
}

}  // namespace mumoe::analysis
