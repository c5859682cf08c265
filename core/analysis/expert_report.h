// What a shareable report of one layer's experts holds (report/html_report.h renders it), made
// from the same LayerAnalysis calls that answer `mumoe stats`, `gallery` and `ablate` and the GUI's
// pages — so the report's numbers are theirs: the statistics of the mode, the ablation sweep (Δ
// accuracy and polysemanticity of every expert), and for the experts shown in detail their
// gallery (thumbnails at display size), class histogram and per-class accuracy change.
//
// Torch-free header.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "analysis/layer_analysis.h"
#include "analysis/layer_comparison.h"
#include "analysis/text_analysis_session.h"
#include "io/file_checks.h"
#include "report/html_report.h"

namespace mumoe::analysis {

struct ReportRequest {
  std::string model_path, data_spec;
  model::LayoutOverrides overrides;  ///< what a plain state dict cannot tell (as the analysis was opened)
  /// Which experts get a section: "all", "top-K" (the K with the largest load) or a list
  /// "3,7,12". Every expert is in the table.
  std::string experts = "top-16";
  int64_t images = 32;           ///< gallery images per expert
  double threshold = 0.5;        ///< load and galleries: a_n ≥ threshold
  bool sweep = true;             ///< ablate every expert for the table's Δ accuracy (else only those shown)
  int64_t thumbnail_pixels = 84; ///< thumbnails are encoded at this display size
  std::string app_version;
  std::string generated_utc;     ///< e.g. "2026-11-28 17:05 UTC" ("" = now)
};

/// The experts a request's `experts` names, for a mode of `n` experts with `loads` (UsageError
/// for anything else, or an expert out of range).
std::vector<int64_t> select_report_experts(const std::string& experts, const std::vector<int64_t>& loads);

/// Called with (step done, steps): the sweep's experts, then each detailed expert; false cancels
/// (Cancelled).
using ReportProgress = std::function<bool(int64_t done, int64_t total)>;

/// Builds the report of expert mode 0 of `analysis`. Throws UsageError for a bad selection.
report::ExpertReport make_expert_report(LayerAnalysis& analysis, const ReportRequest& request,
                                        const ReportProgress& progress = {});

/// The report of a GPT's MLP block (`session` opened and extracted): the table with next-token
/// accuracy and loss when each expert is ablated, top next tokens, and for the experts shown their
/// token gallery in context (±24 tokens) and their ablation in one line. Per-class charts are
/// left out (a class is a next token: thousands of them).
report::ExpertReport make_token_report(TextAnalysisSession& session, const ReportRequest& request,
                                       const ReportProgress& progress = {});

/// Renders `report` and writes it to `path` atomically (nothing half-written), after
/// io::check_outputs: `path` may not be one of `inputs` (the model, the cache, data or session
/// files) nor a FIFO or device. Returns the bytes written. How every front end saves a report.
int64_t write_report(const report::ExpertReport& report, const std::string& path,
                     const std::vector<io::NamedInput>& inputs);

/// `compare`'s rows as a report's section (the same figures as `mumoe compare --json`), all
/// computed on `data_spec`.
report::ComparisonSection comparison_section(const std::vector<LayerComparison>& rows, const std::string& data_spec);

}  // namespace mumoe::analysis
