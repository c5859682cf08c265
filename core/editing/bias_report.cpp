#include "editing/bias_report.h"
#include "io/number_text.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "model/model_summary.h"

namespace mumoe::editing {

std::vector<VariantMetrics> bias_report_variants(const BiasStudy& study, const BiasTask& task,
                                                 const std::vector<LogitEdit>& edits, bool baselines,
                                                 const OversampleOptions& oversample) {
  std::vector<VariantMetrics> variants{study.measure(task, "model", study.test().logits)};
  if (!edits.empty()) {
    variants.push_back(study.measure(task, edited_model_name(edits.size()), study.edited_test_logits(edits)));
    measure_mrs_against(variants.back(), variants.front());
  }
  if (baselines) {
    const auto unedited = variants.front();
    variants.push_back(blind_threshold_baseline(study, task, {}, unedited));
    variants.push_back(oversample_baseline(study, task, oversample, unedited));
  }
  return variants;
}

report::ExpertReport make_bias_report(const BiasStudy& study, const BiasTask& task, const std::vector<LogitEdit>& edits,
                                      const BiasReportRequest& request) {
  const auto variants = bias_report_variants(study, task, edits, request.baselines, request.oversample);
  const auto table = variant_table(task, variants);
  report::ExpertReport r;
  r.title = report::file_name(request.model_path);
  const auto summary = model::summarize_model_file(request.model_path);
  std::string edit_lines;
  for (const auto& e : edits) edit_lines += (edit_lines.empty() ? "" : "; ") + e.describe();
  const auto accuracy = io::fixed_text(100 * variants.front().test_accuracy, 2) + " %";
  r.card = {{"model", request.model_path},
            {"architecture", summary.backbone.empty() ? summary.architecture : summary.architecture + ", " + summary.backbone},
            {"outputs", std::to_string(study.target_names().size()) + " (multi-label)"},
            {"task", "output " + task.target + ", sensitive attribute " + task.sensitive + ", target subpopulation " +
                         task.subpopulation.text()},
            {"data", request.data_spec},
            {"test samples", std::to_string(study.test().logits.size(0))},
            {"test accuracy (all outputs)", accuracy},
            {"edits", edits.empty() ? "none" : std::to_string(edits.size()) + ": " + edit_lines},
            {"provenance", summary.provenance_json},
            {"made by", "mumoe-studio " + request.app_version},
            {"generated", request.generated_utc.empty() ? report::utc_now_text() : request.generated_utc}};
  report::BiasSection b;
  b.title = "Output " + task.target + ", sensitive attribute " + task.sensitive + ": accuracy of " + task.target +
            " in each cell, and the fairness metrics, for each variant of the model";
  b.columns = table.variants;
  for (const auto& row : table.rows) {
    report::BiasSection::Row out{(row.target_cell ? "* " : "") + row.label, row.target_cell, row.fraction, {}};
    for (const auto& v : row.values) out.values.push_back(v ? *v : std::numeric_limits<double>::quiet_NaN());
    b.rows.push_back(std::move(out));
  }
  b.note = "* = the target subpopulation." +
           (table.mrs_reference.empty() ? std::string()
                                        : " MRS against \"" + table.mrs_reference +
                                              "\": the gain on the target cell minus the change on the other three.");
  r.bias = std::move(b);
  return r;
}

}  // namespace mumoe::editing
