// One expert-conditional logit rewrite (spec §5, paper §4.2): for output o of the analysed
// μMoE layer,  y_o ← y_o + λ āᵀa,  where a are the sample's expert coefficients (first expert
// mode) and ā is the mean coefficient vector of a subpopulation's TRAINING samples. The
// blind-threshold baseline is ā = 1 (so āᵀa = Σa = 1: a constant shift of λ).
//
// Plain C++ + JSON (no LibTorch), so edit lists can be shown, stored and exchanged by the GUI,
// the CLI and the session database alike.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace mumoe::editing {

struct LogitEdit {
  std::string layer = "head";     ///< the μMoE layer whose output is edited
  std::string target;              ///< name of the edited output (a label of the model)
  int64_t output = -1;             ///< its index o
  std::string subpopulation;       ///< predicate text, e.g. "long_sleeves=1&frame=1"
  bool blind = false;              ///< the blind-threshold baseline (ā = 1)
  std::vector<double> mean_coefficients;  ///< ā, one entry per expert of mode 0
  double lambda = 0;               ///< λ (its sign moves the logit toward the wanted label)
  int64_t support = 0;             ///< training samples that defined ā
  std::string training_data;       ///< SPEC of those samples

  /// One line for lists and logs: "long_sleeves += 128·āᵀa  [long_sleeves=1&frame=1, 540 samples]".
  std::string describe() const;
};

nlohmann::json to_json(const LogitEdit& edit);
/// Throws UsageError naming `source` and the missing or mistyped field.
LogitEdit logit_edit_from_json(const nlohmann::json& json, const std::string& source);

nlohmann::json to_json(const std::vector<LogitEdit>& edits);
/// Accepts a list of edits or an object {"edits": [...]} (what `mumoe rewrite --json` prints).
std::vector<LogitEdit> logit_edits_from_json(const nlohmann::json& json, const std::string& source);
/// Reads an edits file (JSON). Throws FileError naming the file.
std::vector<LogitEdit> read_edits_file(const std::string& path);

}  // namespace mumoe::editing
