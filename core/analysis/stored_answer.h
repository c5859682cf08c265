// Reading a derived answer back from the analysis cache, robustly: a stored result that is not
// valid JSON, or JSON of the wrong shape (a damaged or hand-edited row, an older writer), is
// deleted and reported as absent, so the caller recomputes it and stores a good one. A damaged
// result therefore costs one recomputation, never a failing command.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <optional>
#include <string>

#include "analysis/answer.h"
#include "io/json_file.h"
#include "cache/analysis_cache.h"
#include "io/errors.h"

namespace mumoe::analysis {

/// The result (run_id, kind, key) decoded by `decode(const nlohmann::json&)`, or nullopt when
/// there is none or it could not be decoded (then it is deleted).
template <typename Decode>
auto stored_answer(cache::AnalysisCache& cache, int64_t run_id, const std::string& kind, const std::string& key,
                   Decode decode) -> std::optional<decltype(decode(nlohmann::json()))> {
  const auto text = cache.get_result(run_id, kind, key);
  if (!text) return std::nullopt;
  try {
    return decode(io::parse_bounded_json(*text, cache.path(), "stored answer " + kind + "/" + key));
  } catch (const nlohmann::json::exception&) {
  } catch (const Error&) {
  }
  cache.delete_result(run_id, kind, key);
  return std::nullopt;
}

/// The one way a session answers a question it caches: the stored answer (run_id, kind, key)
/// when there is one and `recompute` is false; else `compute()`, stored as to_json(value) so
/// that the next asking is a lookup. Timed either way.
template <typename Decode, typename Compute>
auto cached_answer(cache::AnalysisCache& cache, int64_t run_id, const std::string& kind, const std::string& key,
                   bool recompute, Decode decode, Compute compute) -> Answer<decltype(compute())> {
  const auto start = std::chrono::steady_clock::now();
  const auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  if (!recompute)
    if (auto stored = stored_answer(cache, run_id, kind, key, decode)) return {std::move(*stored), true, seconds()};
  auto value = compute();
  cache.put_result(run_id, kind, key, to_json(value).dump());
  return {std::move(value), false, seconds()};
}

}  // namespace mumoe::analysis
