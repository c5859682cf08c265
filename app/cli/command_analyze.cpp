// mumoe analyze MODEL --data SPEC: extract a model's μMoE-layer coefficients, predictions and
// inputs into the analysis cache (nothing is recomputed on a second run), then summarise.
// --shard K/N extracts only shard K's chunks of the run into a cache of its own (a cluster task:
// `mumoe cache merge` joins the shards; cache/cache_merge.h), and summarises nothing.
#include <nlohmann/json.hpp>

#include <chrono>
#include <iomanip>
#include <iostream>

#include "analysis/text_analysis_session.h"
#include "cache/cache_merge.h"
#include "analysis_options.h"
#include "cli_support.h"

namespace mumoe::cli {
namespace {

struct AnalyzeOptions : AnalysisCliOptions {
  TextCliOptions text;
  std::string shard;  ///< "K/N", "" = the whole run

  /// Declares these options on the command `app`.
  void add_to(CLI::App* app) {
    AnalysisCliOptions::add_to(app);
    text.add_to(app);
    app->add_option("--shard", shard,
                    "K/N: extract only shard K of N of the run's chunks (0 ≤ K < N) into --cache, for a cluster task; "
                    "`mumoe cache merge` joins the shards");
  }
};

// "K/N" with 0 ≤ K < N → the shard; anything else is a usage error.
analysis::ChunkBatching::Shard parse_shard(const std::string& text) {
  const auto parsed = cache::parse_shard(text);
  if (!parsed) throw UsageError("--shard " + text + ": expected K/N with 0 ≤ K < N, e.g. 3/8");
  if (parsed->second == 1) throw UsageError("--shard 0/1 is the whole run: leave --shard out");
  return {parsed->first, parsed->second};
}

// Extraction only, for a shard or a GPT: what was computed, no summary of a run that may be partial.
int report_extraction(const AnalyzeOptions& o, const std::string& layer, const std::string& cache_path,
                      const analysis::ExtractionSummary& summary, int64_t samples, double seconds) {
  const auto& shard = o.session.chunk_batching.shard;
  if (o.json) {
    nlohmann::json j = {{"model", o.session.model_path.empty() ? o.model.model : o.session.model_path},
                        {"data", o.session.data_spec},
                        {"layer", layer},
                        {"cache", cache_path},
                        {"run_id", summary.run_id},
                        {"chunks_computed", summary.chunks_computed},
                        {"chunks_reused", summary.chunks_reused},
                        {"samples", samples},
                        {"seconds", seconds}};
    if (!shard.whole()) j["shard"] = {{"index", shard.index}, {"count", shard.count}};
    std::cout << json_text(j) << "\n";
    return kSuccess;
  }
  std::cout << o.model.model << ", layer '" << layer << "'";
  if (!shard.whole()) std::cout << ", shard " << shard.index << "/" << shard.count;
  std::cout << ": " << summary.chunks_computed << " chunks computed, " << summary.chunks_reused << " reused, into "
            << cache_path << " (run " << summary.run_id << ")\n";
  if (!shard.whole()) std::cout << "  merge the shards with `mumoe cache merge SHARDS… --into CACHE`\n";
  return kSuccess;
}

int run_analyze(AnalyzeOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  if (!o.shard.empty()) o.session.chunk_batching.shard = parse_shard(o.shard);
  const auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  const auto progress = [&](const analysis::ExtractionProgress& p) {
    return report_progress("extracting", p.samples_done, p.samples_total, p.elapsed_seconds, p.eta_seconds, o.quiet);
  };
  if (is_text_model(o)) {  // a GPT: its per-token extraction of one block
    auto session = open_text_analysis(o, o.text, false);
    const auto summary = session->extract(progress);
    return report_extraction(o, session->layer_name(), session->cache_path(), summary, session->eval_set().tokens(),
                             seconds());
  }
  if (!o.session.chunk_batching.shard.whole()) {
    catch_interrupts();
    o.session.model_path = o.model.model;
    o.session.overrides = o.model.overrides();
    auto session = analysis::AnalysisSession::open(o.session);
    const auto summary = session->extract(progress);
    return report_extraction(o, session->layer_name(), session->cache_path(), summary, session->sample_count(),
                             seconds());
  }
  analysis::ExtractionSummary summary;
  auto session = open_analysis(o, &summary);
  const auto accuracy = session->accuracy();
  const auto stats = session->statistics(0).value;
  const double elapsed = seconds();
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
                                 {"seconds", elapsed}}))
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
            << std::setprecision(2) << "  " << elapsed << " s\n";
  return kSuccess;
}

}  // namespace

Command add_analyze_command(CLI::App& parent) {
  return make_command<AnalyzeOptions>(parent, "analyze",
                                      "Extract expert coefficients and predictions into the analysis cache",
                                      run_analyze);
}

}  // namespace mumoe::cli
