#include "editing/logit_edit.h"
#include "io/json_file.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "io/errors.h"

namespace mumoe::editing {

std::string LogitEdit::describe() const {
  std::ostringstream s;
  s << target << " += " << lambda << (blind ? " (blind threshold)" : "·āᵀa");
  if (!subpopulation.empty()) s << "  [" << subpopulation << ", " << support << " training samples]";
  return s.str();
}

nlohmann::json to_json(const LogitEdit& e) {
  return {{"layer", e.layer},
          {"target", e.target},
          {"output", e.output},
          {"subpopulation", e.subpopulation},
          {"blind", e.blind},
          {"lambda", e.lambda},
          {"support", e.support},
          {"training_data", e.training_data},
          {"mean_coefficients", e.mean_coefficients}};
}

LogitEdit logit_edit_from_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) throw UsageError(source + ": an edit is not a JSON object");
  LogitEdit e;
  auto get = [&](const char* key, auto& out, bool required) {
    if (!j.contains(key)) {
      if (required) throw UsageError(source + ": edit lacks '" + key + "'");
      return;
    }
    try {
      j.at(key).get_to(out);
    } catch (const nlohmann::json::exception&) {
      throw UsageError(source + ": edit field '" + key + "' has the wrong type");
    }
  };
  get("layer", e.layer, false);
  get("target", e.target, true);
  get("output", e.output, true);
  get("subpopulation", e.subpopulation, false);
  get("blind", e.blind, false);
  get("lambda", e.lambda, true);
  get("support", e.support, false);
  get("training_data", e.training_data, false);
  get("mean_coefficients", e.mean_coefficients, true);
  if (e.output < 0) throw UsageError(source + ": edit output must be ≥ 0");
  if (e.mean_coefficients.empty()) throw UsageError(source + ": edit has no mean coefficients");
  if (!std::isfinite(e.lambda)) throw UsageError(source + ": edit lambda is not finite");
  for (double v : e.mean_coefficients)
    if (!std::isfinite(v)) throw UsageError(source + ": edit mean coefficients contain NaN or infinity");
  return e;
}

nlohmann::json to_json(const std::vector<LogitEdit>& edits) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& e : edits) list.push_back(to_json(e));
  return list;
}

std::vector<LogitEdit> logit_edits_from_json(const nlohmann::json& j, const std::string& source) {
  const nlohmann::json* list = &j;
  if (j.is_object() && j.contains("edits")) list = &j.at("edits");
  if (!list->is_array()) throw UsageError(source + ": expected a list of edits or {\"edits\": [...]}");
  std::vector<LogitEdit> edits;
  for (const auto& item : *list) edits.push_back(logit_edit_from_json(item, source));
  return edits;
}

std::vector<LogitEdit> read_edits_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError(path, "cannot open the edits file");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto j = io::parse_bounded_json(text, path);
  try {
    return logit_edits_from_json(j, "edit list");
  } catch (const UsageError& e) {
    throw FileError(path, e.what());
  }
}

}  // namespace mumoe::editing
