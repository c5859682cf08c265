#include "bias_report.h"

#include <iomanip>
#include <sstream>

#include "bias_options.h"

namespace mumoe::cli {

void print_variants(std::ostream& out, const editing::BiasTask& task,
                    const std::vector<editing::VariantMetrics>& variants) {
  using editing::VariantMetrics;
  const int w = 16;
  out << std::left << std::setw(34) << "" << std::right;
  for (const auto& v : variants) out << std::setw(w) << v.name;
  out << "\n";
  auto row = [&](const std::string& label, auto value) {
    out << std::left << std::setw(34) << label << std::right;
    for (const auto& v : variants) out << std::setw(w) << value(v);
    out << "\n";
  };
  for (int t = 1; t >= 0; --t)
    for (int s = 1; s >= 0; --s) {
      const bool is_target = variants.front().report.target_value == t && variants.front().report.sensitive_value == s;
      const std::string label = (is_target ? "* " : "  ") + task.target + "=" + std::to_string(t) + " & " +
                                task.sensitive + "=" + std::to_string(s) + " (" +
                                std::to_string(variants.front().report.cells[t][s].count) + ")";
      row(label, [&](const VariantMetrics& v) { return percent(v.report.cell_accuracy(t, s)); });
    }
  row("target subpopulation accuracy", [](const VariantMetrics& v) { return percent(v.report.target_subpopulation_accuracy); });
  row("equality of opportunity", [](const VariantMetrics& v) { return percent(v.report.equality_of_opportunity); });
  row("STD bias", [](const VariantMetrics& v) { return percent(v.report.std_bias); });
  row("Max-Min (lowest cell)", [](const VariantMetrics& v) { return percent(v.report.max_min); });
  row(task.target + " accuracy", [](const VariantMetrics& v) { return percent(v.report.target_accuracy); });
  row("test accuracy (all outputs)", [](const VariantMetrics& v) { return percent(v.test_accuracy); });
  std::string reference;
  bool any_mrs = false;
  for (const auto& v : variants)
    if (v.mrs) {
      any_mrs = true;
      reference = v.mrs_reference;
    }
  if (!any_mrs) {
    out << "(* = target subpopulation)\n";
    return;
  }
  row("MRS", [](const VariantMetrics& v) -> std::string {
    if (!v.mrs) return "—";
    std::ostringstream s;
    s << std::fixed << std::setprecision(4) << *v.mrs;
    return s.str();
  });
  out << "(* = target subpopulation; MRS against \"" << reference
      << "\" = the gain on its target cell minus the change on the other three cells)\n";
}

}  // namespace mumoe::cli
