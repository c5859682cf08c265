// Reading a derived answer back from the analysis cache, robustly: a stored result that is not
// valid JSON, or JSON of the wrong shape (a damaged or hand-edited row, an older writer), is
// deleted and reported as absent, so the caller recomputes it and stores a good one. A damaged
// result therefore costs one recomputation, never a failing command.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

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
    return decode(nlohmann::json::parse(*text));
  } catch (const nlohmann::json::exception&) {
  } catch (const Error&) {
  }
  cache.delete_result(run_id, kind, key);
  return std::nullopt;
}

}  // namespace mumoe::analysis
