// The shareable report of a multi-label model's bias correction (`mumoe report` on a multi-label
// model, issue 49): the model card and the comparison table (editing::variant_table) of the model
// as opened, the model with its edits and, when asked, the two baselines — every MRS measured
// against the model as opened — rendered by report/html_report.h. The numbers are the ones
// `mumoe fairness` and `mumoe rewrite` print: the same BiasStudy calls.
#pragma once

#include <string>
#include <vector>

#include "editing/bias_report_request.h"
#include "editing/bias_study.h"
#include "report/html_report.h"

namespace mumoe::editing {

/// "model"; "model + k edits" when `edits` is not empty; "blind threshold" and "oversample" with
/// `baselines` — MRS of every other variant against "model". Baselines need the study's training
/// split (UsageError without one).
std::vector<VariantMetrics> bias_report_variants(const BiasStudy& study, const BiasTask& task,
                                                 const std::vector<LogitEdit>& edits, bool baselines,
                                                 const OversampleOptions& oversample = {});

/// The page: the card (model, architecture, task, data, test samples, edits, provenance, app
/// version, time) and report::BiasSection from bias_report_variants. No expert table: a
/// multi-label model's expert analysis is not per class.
report::ExpertReport make_bias_report(const BiasStudy& study, const BiasTask& task, const std::vector<LogitEdit>& edits,
                                      const BiasReportRequest& request);

}  // namespace mumoe::editing
