#include "bias_report.h"

#include <torch/torch.h>

#include <iomanip>
#include <numeric>

#include "bias_options.h"

namespace mumoe::cli {

double VariantResult::test_accuracy() const {
  if (per_target_accuracy.empty()) return 0;
  return std::accumulate(per_target_accuracy.begin(), per_target_accuracy.end(), 0.0) / per_target_accuracy.size();
}

VariantResult evaluate_variant(const editing::BiasStudy& study, const editing::BiasTask& task, std::string name,
                               const torch::Tensor& test_logits) {
  VariantResult v;
  v.name = std::move(name);
  v.report = study.fairness(task, test_logits);
  v.per_target_accuracy = study.per_target_accuracy(test_logits);
  return v;
}

nlohmann::json to_json(const VariantResult& v, const VariantResult* baseline) {
  auto j = editing::to_json(v.report);
  j["name"] = v.name;
  j["test_accuracy"] = v.test_accuracy();
  j["per_target_accuracy"] = v.per_target_accuracy;
  if (baseline) j["mrs"] = editing::mrs(baseline->report, v.report);
  return j;
}

void print_variants(std::ostream& out, const editing::BiasTask& task, const std::vector<VariantResult>& variants) {
  const int w = 16;
  out << std::left << std::setw(34) << "" << std::right;
  for (const auto& v : variants) out << std::setw(w) << v.name;
  out << "\n";
  auto row = [&](const std::string& label, auto value, bool skip_first = false) {
    out << std::left << std::setw(34) << label << std::right;
    for (size_t i = 0; i < variants.size(); ++i) {
      if (skip_first && i == 0) out << std::setw(w) << "—";
      else out << std::setw(w) << value(variants[i]);
    }
    out << "\n";
  };
  for (int t = 1; t >= 0; --t)
    for (int s = 1; s >= 0; --s) {
      const bool is_target = variants.front().report.target_value == t && variants.front().report.sensitive_value == s;
      const std::string label = (is_target ? "* " : "  ") + task.target + "=" + std::to_string(t) + " & " +
                                task.sensitive + "=" + std::to_string(s) + " (" +
                                std::to_string(variants.front().report.cells[t][s].count) + ")";
      row(label, [&](const VariantResult& v) { return percent(v.report.cell_accuracy(t, s)); });
    }
  row("target subpopulation accuracy", [](const VariantResult& v) { return percent(v.report.target_subpopulation_accuracy); });
  row("equality of opportunity", [](const VariantResult& v) { return percent(v.report.equality_of_opportunity); });
  row("STD bias", [](const VariantResult& v) { return percent(v.report.std_bias); });
  row("Max-Min (lowest cell)", [](const VariantResult& v) { return percent(v.report.max_min); });
  row(task.target + " accuracy", [](const VariantResult& v) { return percent(v.report.target_accuracy); });
  row("test accuracy (all outputs)", [](const VariantResult& v) { return percent(v.test_accuracy()); });
  row("MRS", [&](const VariantResult& v) {
        std::ostringstream s;
        s << std::fixed << std::setprecision(4) << editing::mrs(variants.front().report, v.report);
        return s.str();
      }, /*skip_first=*/true);
  out << "(* = target subpopulation; MRS = its gain minus the change on the other three cells)\n";
}

}  // namespace mumoe::cli
