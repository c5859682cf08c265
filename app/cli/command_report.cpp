// mumoe report MODEL --data SPEC [--layer NAME] [--experts all|top-K|LIST] [--images N]
// [--no-sweep] --output report.html: one self-contained HTML file of a layer's experts (the model
// card, the sortable expert table, a section per chosen expert with its gallery, class histogram
// and ablation chart, the sweep chart; a GPT block's tokens in their context, with next-token
// accuracy and loss), computed through the same core calls as stats, gallery and ablate
// (analysis/expert_report.h) and rendered by report/html_report.h. A missing analysis is computed
// first, with progress, as every command does. On a multi-label model: --target ATTR --sensitive
// ATTR [--subpop P] [--session DB] [--baselines]: the bias-correction table (editing/bias_report.h)
// of the model as opened, with the session's edits, and the baselines. --compare OTHER (repeated)
// adds `mumoe compare`'s table and chart of MODEL's layer beside each OTHER's on the same data
// (analysis::compare_layer, as `compare` and the Compare page compute them).
#include <nlohmann/json.hpp>

#include <iostream>
#include <optional>

#include "analysis/expert_report.h"
#include "analysis_options.h"
#include "bias_options.h"
#include "data/dataset.h"
#include "editing/bias_report.h"
#include "editing/edit_session_store.h"
#include "io/file_checks.h"
#include "model/model_file.h"
#include "model/model_summary.h"
#include "cli_support.h"
#include "io/atomic_file.h"
#include "io/errors.h"
#include "io/output_files.h"
#include "report/html_report.h"

namespace mumoe::cli {
namespace {

struct ReportOptions {
  AnalysisCliOptions analysis;
  BlockCliOptions block;
  TextCliOptions text;
  analysis::ReportRequest request;
  std::string output;
  bool no_sweep = false;
  // A multi-label model's bias table.
  std::string target, sensitive, subpopulation, session, train_data;
  bool baselines = false;
  std::vector<std::string> compare;  ///< models compared with MODEL

  /// Declares these options on the command `app`.
  void add_to(CLI::App* app) {
    analysis.add_to(app);
    block.add_to(app);
    text.add_to(app);
    app->add_option("--output", output, "The HTML file to write")->required();
    app->add_option("--experts", request.experts,
                    "Experts with a section: all, top-K (the most loaded; default top-16) or a list like 3,7,12");
    app->add_option("--images", request.images, "Gallery images per expert (default 32)")->check(CLI::PositiveNumber);
    app->add_option("--threshold", request.threshold, "Load and galleries: a_n ≥ threshold (default 0.5)");
    app->add_flag("--no-sweep", no_sweep,
                  "Ablate only the experts shown, not every expert (the table's Δ accuracy then has gaps)");
    app->add_option("--target", target, "Multi-label model: the output whose bias table is shown");
    app->add_option("--sensitive", sensitive, "Multi-label model: the sensitive attribute of the data");
    app->add_option("--subpop", subpopulation,
                    "Multi-label model: the target subpopulation, e.g. 'long_sleeves=1&frame=1' (default: the "
                    "worst-served cell)");
    app->add_option("--session", session, "Multi-label model: the edit-session database whose edits are shown");
    app->add_flag("--baselines", baselines,
                  "Multi-label model: also the blind-threshold and oversampling baselines (needs the training split)");
    app->add_option("--train-data", train_data,
                    "Multi-label model: training data SPEC for the baselines (default: --data with :test → :train)");
    app->add_option("--compare", compare,
                    "Also `mumoe compare`'s table and chart: MODEL's layer beside this model's on the same data "
                    "(repeat for more)");
  }
};

// `compare`'s rows of MODEL's layer and each --compare model on the report's data (--layer names
// the layer of each, as `mumoe compare` reads it).
report::ComparisonSection comparison(const ReportOptions& o) {
  std::vector<analysis::LayerComparison> rows;
  std::vector<std::string> models = {o.analysis.model.model};
  models.insert(models.end(), o.compare.begin(), o.compare.end());
  const auto progress = progress_reporter("comparing", o.analysis.quiet || o.analysis.json);
  for (size_t i = 0; i < models.size(); ++i) {
    auto options = o.analysis.session;
    options.model_path = models[i];
    options.overrides = o.analysis.model.overrides();
    rows.push_back(analysis::compare_layer(options, [&](const std::string&, int64_t done, int64_t total, double) {
      return progress(done, total);
    }));
  }
  return analysis::comparison_section(rows, o.analysis.session.data_spec);
}

report::ExpertReport bias_report(const ReportOptions& o) {
  if (o.target.empty() || o.sensitive.empty())
    throw UsageError(o.analysis.model.model + " is a multi-label model: its report is the bias table of one output; "
                     "give --target ATTR and --sensitive ATTR (and --session DB for its edits)");
  BiasCliOptions b;
  b.model = o.analysis.model.model;
  // The image default means "not given": a multi-label model reads the bias commands' default.
  if (o.analysis.session.data_spec != analysis::SessionOptions().data_spec) b.data = o.analysis.session.data_spec;
  b.train_data = o.train_data;
  b.device = o.analysis.session.device;
  b.cache = o.analysis.session.cache_path;
  b.quiet = o.analysis.quiet || o.analysis.json;
  auto task = o.subpopulation.empty() ? editing::cell_task(o.target, 1, o.sensitive, 1)
                                      : editing::make_bias_task(o.target, o.subpopulation, o.sensitive);
  const auto edits = o.session.empty() ? std::vector<editing::LogitEdit>{}
                                       : editing::applied_session_edits(o.session, b.model);
  const auto study = open_bias_study(b, /*with_train=*/o.baselines, task_attributes(task));
  if (o.subpopulation.empty())  // as `mumoe fairness`: the worst-served cell
    if (const auto cell = editing::worst_cell(study.fairness(task)))
      task = editing::cell_task(o.target, cell->first, task.sensitive, cell->second);
  editing::BiasReportRequest request;
  request.model_path = b.model;
  request.data_spec = b.data;
  request.baselines = o.baselines;
  request.app_version = MUMOE_VERSION;
  if (o.baselines && !b.quiet) std::cerr << "training the oversampling baseline …\n";
  return editing::make_bias_report(study, task, edits, request);
}

int run_report(ReportOptions& o) {
  auto inputs = analysis_inputs(o.analysis);
  inputs.push_back({o.session, "--session"});  // a multi-label model's edit session
  inputs.push_back({data::feature_file_of(o.train_data), "the --train-data file"});
  for (const auto& model : o.compare) {
    io::require_regular_file(model);  // before hours of analysis
    inputs.push_back({model, "a --compare model"});
  }
  io::check_outputs({{o.output, "--output"}}, inputs);
  const auto progress = progress_reporter("report", o.analysis.quiet || o.analysis.json);
  o.request.model_path = o.analysis.model.model;
  o.request.sweep = !o.no_sweep;
  o.request.app_version = MUMOE_VERSION;
  report::ExpertReport report;
  std::string layer_name;
  const bool multilabel =
      !is_text_model(o.analysis) &&
      model::model_kind(model::ModelFile::load(o.analysis.model.model, o.analysis.session.overrides)) ==
          model::ModelKind::MultiLabel;
  if (!o.compare.empty() && (multilabel || is_text_model(o.analysis)))
    throw UsageError("--compare compares image classifiers' layers on one data set (as `mumoe compare`); " +
                     o.analysis.model.model + " is a " + (multilabel ? "multi-label model" : "language model"));
  // First: a model that cannot be compared fails before the report's own work is done.
  std::optional<report::ComparisonSection> compared;
  if (!o.compare.empty()) compared = comparison(o);
  if (multilabel) {
    report = bias_report(o);
    layer_name = "head";
  } else if (!o.target.empty() || !o.sensitive.empty() || !o.session.empty() || o.baselines) {
    throw UsageError("--target, --sensitive, --subpop, --session and --baselines are for multi-label models; " +
                     o.analysis.model.model + " is not one");
  } else if (is_text_model(o.analysis)) {  // a GPT's block: tokens in context, next-token accuracy and loss
    auto session = open_text_analysis(o.analysis, o.text, true);
    o.request.data_spec = session->eval_set().identity;
    report = analysis::make_token_report(*session, o.request, progress);
    layer_name = session->layer_name();
  } else {
    auto layer = open_layer_analysis(o.analysis, o.block);
    o.request.data_spec = o.analysis.session.data_spec;
    o.request.overrides = o.analysis.session.overrides;
    report = analysis::make_expert_report(*layer, o.request, progress);
    layer_name = layer->layer_name();
  }
  report.comparison = std::move(compared);
  const auto bytes = analysis::write_report(report, o.output, inputs);  // checked before the work too
  if (o.analysis.json) {
    std::cout << json_text(nlohmann::json({{"output", o.output},
                                           {"bias_table", report.bias.has_value()},
                                           {"bytes", bytes},
                                           {"layer", layer_name},
                                           {"experts", report.experts.size()},
                                           {"sections", report.details.size()},
                                           {"compared", report.comparison ? report.comparison->rows.size() : 0}}))
              << "\n";
  } else if (report.bias) {
    std::cout << "wrote " << o.output << " (" << bytes / 1024 << " KiB): the bias table of "
              << report.bias->columns.size() << " variant(s)\n";
  } else {
    std::cout << "wrote " << o.output << " (" << bytes / 1024 << " KiB): " << report.details.size()
              << " experts in detail of " << report.experts.size() << ", layer '" << layer_name << "'\n";
  }
  return kSuccess;
}

}  // namespace

Command add_report_command(CLI::App& parent) {
  return make_command<ReportOptions>(parent, "report",
                                     "Write a self-contained HTML report of a layer's experts",
                                     run_report);
}

}  // namespace mumoe::cli
