// mumoe analyze MODEL --data SPEC: extract a model's μMoE-layer coefficients, predictions and
// inputs into the analysis cache (nothing is recomputed on a second run), then summarise.
#include <nlohmann/json.hpp>

#include <chrono>
#include <iomanip>
#include <iostream>

#include "analysis_options.h"
#include "cli_support.h"

namespace mumoe::cli {
namespace {

int run_analyze(AnalysisCliOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  analysis::ExtractionSummary summary;
  auto session = open_analysis(o, &summary);
  const auto accuracy = session->accuracy();
  const auto stats = session->statistics(0).value;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (o.json) {
    std::cout << json_text(nlohmann::json({{"model", o.session.model_path},
                                 {"data", o.session.data_spec},
                                 {"layer", session->layer_name()},
                                 {"cache", session->cache_path()},
                                 {"run_id", summary.run_id},
                                 {"chunks_computed", summary.chunks_computed},
                                 {"chunks_reused", summary.chunks_reused},
                                 {"cache_set_aside", session->cache_report().set_aside_path},
                                 {"samples", session->sample_count()},
                                 {"expert_dims", session->expert_dims()},
                                 {"class_names", session->class_names()},
                                 {"accuracy", accuracy.overall},
                                 {"per_class_accuracy", accuracy.per_class},
                                 {"dead_experts", stats.dead_experts},
                                 {"mean_active_experts", stats.mean_active_experts},
                                 {"seconds", seconds}}))
              << "\n";
    return kSuccess;
  }
  std::cout << std::fixed << std::setprecision(4) << o.session.model_path << " on " << o.session.data_spec
            << ", layer '" << session->layer_name() << "': " << session->sample_count() << " samples\n"
            << "  cache " << session->cache_path() << " (run " << summary.run_id << "; " << summary.chunks_computed
            << " chunks computed, " << summary.chunks_reused << " reused)\n"
            << "  accuracy " << accuracy.overall << "; " << stats.dead_experts << " of " << stats.experts.size()
            << " experts dead; " << std::setprecision(1) << stats.mean_active_experts
            << " active experts per sample on average\n"
            << std::setprecision(2) << "  " << seconds << " s\n";
  return kSuccess;
}

}  // namespace

Command add_analyze_command(CLI::App& parent) {
  auto o = std::make_shared<AnalysisCliOptions>();
  auto* app = parent.add_subcommand("analyze", "Extract expert coefficients and predictions into the analysis cache");
  o->add_to(app);
  return {app, [o]() { return run_analyze(*o); }};
}

}  // namespace mumoe::cli
