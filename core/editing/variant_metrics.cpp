#include "editing/variant_metrics.h"

#include "io/errors.h"

namespace mumoe::editing {

void measure_mrs_against(VariantMetrics& variant, const VariantMetrics& reference) {
  variant.mrs = mrs(reference.report, variant.report);
  variant.mrs_reference = reference.name;
}

std::string edited_model_name(size_t edits) {
  if (edits == 0) return "model";
  return "model + " + std::to_string(edits) + (edits == 1 ? " edit" : " edits");
}

VariantTable variant_table(const BiasTask& task, const std::vector<VariantMetrics>& variants) {
  if (variants.empty()) throw UsageError("a comparison table needs at least one variant");
  VariantTable table;
  for (const auto& v : variants) table.variants.push_back(v.name);
  auto row = [&](std::string label, auto value, bool cell = false, bool target_cell = false) {
    VariantTable::Row r{std::move(label), cell, target_cell, true, {}};
    for (const auto& v : variants) r.values.push_back(value(v));
    table.rows.push_back(std::move(r));
  };
  const auto& first = variants.front().report;  // the cells' order and sizes
  for (int t = 1; t >= 0; --t)
    for (int s = 1; s >= 0; --s)
      row(task.target + "=" + std::to_string(t) + " & " + task.sensitive + "=" + std::to_string(s) + " (" +
              std::to_string(first.cells[t][s].count) + ")",
          [&](const VariantMetrics& v) -> std::optional<double> { return v.report.cell_accuracy(t, s); },
          true, first.target_value == t && first.sensitive_value == s);
  row("target subpopulation accuracy", [](const VariantMetrics& v) -> std::optional<double> { return v.report.target_subpopulation_accuracy; });
  row("equality of opportunity", [](const VariantMetrics& v) -> std::optional<double> { return v.report.equality_of_opportunity; });
  row("STD bias", [](const VariantMetrics& v) -> std::optional<double> { return v.report.std_bias; });
  row("Max-Min (lowest cell)", [](const VariantMetrics& v) -> std::optional<double> { return v.report.max_min; });
  row(task.target + " accuracy", [](const VariantMetrics& v) -> std::optional<double> { return v.report.target_accuracy; });
  row("test accuracy (all outputs)", [](const VariantMetrics& v) -> std::optional<double> { return v.test_accuracy; });
  for (const auto& v : variants)
    if (v.mrs) table.mrs_reference = v.mrs_reference;
  if (!table.mrs_reference.empty()) {
    row("MRS", [](const VariantMetrics& v) { return v.mrs; });
    table.rows.back().fraction = false;
  }
  return table;
}

nlohmann::json to_json(const VariantMetrics& variant) {
  auto j = to_json(variant.report);
  j["name"] = variant.name;
  j["test_accuracy"] = variant.test_accuracy;
  j["per_target_accuracy"] = variant.per_target_accuracy;
  if (variant.mrs) {
    j["mrs"] = *variant.mrs;
    j["mrs_reference"] = variant.mrs_reference;
  }
  return j;
}

}  // namespace mumoe::editing
