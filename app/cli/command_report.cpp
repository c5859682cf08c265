// mumoe report MODEL --data SPEC [--layer NAME] [--experts all|top-K|LIST] [--images N]
// [--no-sweep] --output report.html: one self-contained HTML file of a layer's experts (the model
// card, the sortable expert table, a section per chosen expert with its gallery, class histogram
// and ablation chart, the sweep chart; a GPT block's tokens in their context, with next-token
// accuracy and loss), computed through the same core calls as stats, gallery and ablate
// (analysis/expert_report.h) and rendered by report/html_report.h. A missing analysis is computed
// first, with progress, as every command does.
#include <nlohmann/json.hpp>

#include <iostream>

#include "analysis/expert_report.h"
#include "analysis_options.h"
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
};

int run_report(ReportOptions& o) {
  io::check_outputs({{o.output, "--output"}}, analysis_inputs(o.analysis));
  const auto progress = progress_reporter("report", o.analysis.quiet || o.analysis.json);
  o.request.model_path = o.analysis.model.model;
  o.request.sweep = !o.no_sweep;
  o.request.app_version = MUMOE_VERSION;
  report::ExpertReport report;
  std::string layer_name;
  if (is_text_model(o.analysis)) {  // a GPT's block: tokens in context, next-token accuracy and loss
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
  const auto html = report::render_html(report);
  io::AtomicFileWriter out(o.output);
  out.write(html.data(), html.size());
  out.commit();
  if (o.analysis.json) {
    std::cout << json_text(nlohmann::json({{"output", o.output},
                                           {"bytes", html.size()},
                                           {"layer", layer_name},
                                           {"experts", report.experts.size()},
                                           {"sections", report.details.size()}}))
              << "\n";
  } else {
    std::cout << "wrote " << o.output << " (" << html.size() / 1024 << " KiB): " << report.details.size()
              << " experts in detail of " << report.experts.size() << ", layer '" << layer_name << "'\n";
  }
  return kSuccess;
}

}  // namespace

Command add_report_command(CLI::App& parent) {
  auto o = std::make_shared<ReportOptions>();
  auto* app = parent.add_subcommand("report", "Write a self-contained HTML report of a layer's experts");
  o->analysis.add_to(app);
  o->block.add_to(app);
  o->text.add_to(app);
  app->add_option("--output", o->output, "The HTML file to write")->required();
  app->add_option("--experts", o->request.experts,
                  "Experts with a section: all, top-K (the most loaded; default top-16) or a list like 3,7,12");
  app->add_option("--images", o->request.images, "Gallery images per expert (default 32)")->check(CLI::PositiveNumber);
  app->add_option("--threshold", o->request.threshold, "Load and galleries: a_n ≥ threshold (default 0.5)");
  app->add_flag("--no-sweep", o->no_sweep,
                "Ablate only the experts shown, not every expert (the table's Δ accuracy then has gaps)");
  return {app, [o]() { return run_report(*o); }};
}

}  // namespace mumoe::cli
