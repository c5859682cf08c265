#include "analysis_options.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>

#include "cli_support.h"
#include "data/dataset.h"
#include "editing/bias_session.h"
#include "model/manifest.h"
#include "model/model_file.h"

namespace mumoe::cli {

void AnalysisCliOptions::add_to(CLI::App* app) {
  model.add_to(app);
  data_option_ = app->add_option("--data", session.data_spec,
                                 "Data SPEC (default fashion-mnist:test, or biased-fmnist:test for a multi-label model; "
                                 "features:FILE for a bare layer)");
  app->add_option("--layer", session.layer, "μMoE layer to analyse (default: the model's only one)");
  app->add_option("--cache", session.cache_path,
                  "Analysis cache file (default $MUMOE_CACHE, else ~/.cache/mumoe-studio/analysis.sqlite)");
  add_device_option(app, session.device);
  app->add_option("--chunk-size", session.chunk_size, "Samples per extraction chunk (default 500)");
  add_json_flag(app, json);
  add_quiet_flag(app, quiet);
  app->add_flag("--recompute", recompute,
                "Answer afresh: drop this run's stored answers and any damaged chunks, and recompute them");
}

namespace {

void report_cache_opening(const cache::CacheOpenReport& report) {
  if (const auto note = cache::opening_note(report); !note.empty()) std::cerr << "mumoe: warning: " << note << "\n";
}

void report_repair(const cache::CacheCheckReport& report, const std::string& cache_path, bool quiet) {
  for (const auto& p : report.problems)
    std::cerr << "mumoe: " << cache_path << ": run " << p.run_id << ", " << p.where << ": " << p.problem << " ("
              << p.action << ")\n";
  if (!quiet && report.runs > 0)
    std::cerr << "mumoe: recomputing: stored answers dropped"
              << (report.problems.empty() ? "" : ", " + std::to_string(report.problems.size()) + " damaged part(s) repaired")
              << "\n";
}

/// The CLI's steps between opening and extracting: warn about a set-aside cache file before a
/// long extraction, and --recompute.
analysis::OpenSteps open_steps(const AnalysisCliOptions& o, const std::string& cache_option) {
  analysis::OpenSteps steps;
  steps.cache_opened = report_cache_opening;
  steps.recompute = o.recompute;
  const auto cache_path = cache_option.empty() ? cache::default_cache_path() : cache_option;
  steps.recomputed = [cache_path, quiet = o.quiet](const cache::CacheCheckReport& r) { report_repair(r, cache_path, quiet); };
  return steps;
}

}  // namespace

bool report_progress(const std::string& label, int64_t done, int64_t total, double elapsed, double eta, bool quiet) {
  if (!quiet) {
    static const bool tty = ::isatty(STDERR_FILENO);
    static int64_t last_decile = -1;
    const int64_t percent = total ? done * 100 / total : 100;
    if (tty || percent / 10 != last_decile || done == total) {
      // A finished bar forgets its tenth, so that the next one (another step, or another run in
      // the same process: the CLI tests) prints its first line.
      last_decile = done == total ? -1 : percent / 10;
      char eta_text[32] = "";  // nothing while unknown (eta < 0)
      if (eta >= 0) std::snprintf(eta_text, sizeof eta_text, ", ETA %.1f s", eta);
      std::fprintf(stderr, "%s%s %lld/%lld (%lld%%) %.1f s%s%s", tty ? "\r" : "", label.c_str(),
                   static_cast<long long>(done), static_cast<long long>(total), static_cast<long long>(percent),
                   elapsed, eta_text, tty && done < total ? "" : "\n");
      std::fflush(stderr);
    }
  }
  return !interrupted();
}

std::function<bool(int64_t, int64_t)> progress_reporter(const std::string& label, bool quiet) {
  const auto start = std::chrono::steady_clock::now();
  return [label, quiet, start](int64_t done, int64_t total) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double eta = done > 0 ? elapsed / static_cast<double>(done) * static_cast<double>(total - done) : 0;
    return report_progress(label, done, total, elapsed, eta, quiet);
  };
}

void AnalysisCliOptions::resolve_default_data() {
  if (data_option_ && data_option_->count() > 0) return;  // given, even if it names the default
  if (session.data_spec != analysis::SessionOptions().data_spec) return;
  if (model::ModelFile::load(model.model, model.overrides()).manifest().task == model::kMultiLabel)
    session.data_spec = editing::BiasSessionOptions().test_spec;
}

std::unique_ptr<analysis::AnalysisSession> open_analysis(AnalysisCliOptions& o, analysis::ExtractionSummary* summary) {
  catch_interrupts();
  o.session.model_path = o.model.model;
  o.session.overrides = o.model.overrides();
  o.resolve_default_data();
  return analysis::AnalysisSession::open_extracted(
      o.session,
      [&](const analysis::ExtractionProgress& p) {
        return report_progress("extracting", p.samples_done, p.samples_total, p.elapsed_seconds, p.eta_seconds,
                               o.quiet);
      },
      summary, open_steps(o, o.session.cache_path));
}

std::vector<io::NamedInput> analysis_inputs(const AnalysisCliOptions& o) {
  const auto& s = o.session;
  std::vector<io::NamedInput> inputs = {{o.model.model, "the model"},
                                        {s.cache_path.empty() ? cache::default_cache_path() : s.cache_path,
                                         "the analysis cache"}};
  for (const auto* spec : {&s.data_spec, &s.gallery_images})
    if (const auto file = data::feature_file_of(*spec); !file.empty()) inputs.push_back({file, "a data file"});
  return inputs;
}

std::string class_name(const analysis::AnalysisSession& session, int64_t c) {
  const auto& names = session.class_names();
  return c >= 0 && c < static_cast<int64_t>(names.size()) ? names[c] : "class " + std::to_string(c);
}

void TextCliOptions::add_to(CLI::App* app) {
  app->add_option("--max-sequences", max_sequences,
                  "GPT models: evaluation sequences of block_size tokens from the validation split (default " +
                      std::to_string(analysis::kDefaultLmSequences) + "; 0 = all)");
}

bool is_text_model(const AnalysisCliOptions& o) { return analysis::is_gpt_model_file(o.model.model); }

std::unique_ptr<analysis::TextAnalysisSession> open_text_analysis(AnalysisCliOptions& o, const TextCliOptions& text,
                                                                  bool extract) {
  catch_interrupts();
  analysis::TextSessionOptions t;
  t.model_path = o.model.model;
  // The image default means "not given": a GPT reads the fortunes it was trained on.
  t.data_spec = o.session.data_spec == analysis::SessionOptions().data_spec ? "fortunes" : o.session.data_spec;
  t.layer = o.session.layer;
  t.cache_path = o.session.cache_path;
  t.device = o.session.device;
  t.max_sequences = text.max_sequences;
  t.n_head = o.model.heads;
  t.tokenizer = o.model.tokenizer;
  t.chunk_batching = o.session.chunk_batching;  // a shard's chunks (analyze --shard)
  if (!extract) {  // a question that needs no coefficients (the model's own text)
    auto session = analysis::TextAnalysisSession::open(t);
    report_cache_opening(session->cache_report());
    if (o.recompute) report_repair(session->recompute(), session->cache_path(), o.quiet);
    return session;
  }
  return analysis::TextAnalysisSession::open_extracted(
      t,
      [&](const analysis::ExtractionProgress& p) {
        return report_progress("extracting tokens", p.samples_done, p.samples_total, p.elapsed_seconds,
                               p.eta_seconds, o.quiet);
      },
      nullptr, open_steps(o, t.cache_path));
}

void BlockCliOptions::add_to(CLI::App* app) {
  app->add_option("--max-images", max_images,
                  "μMoE layers inside a ViT or MLP-Mixer (--layer blocks.L.mlp, mixer_blocks.…): analyse the first N images of --data (default 0 = all)");
}

std::unique_ptr<analysis::LayerAnalysis> open_layer_analysis(AnalysisCliOptions& o, const BlockCliOptions& block) {
  catch_interrupts();
  o.session.model_path = o.model.model;
  o.session.overrides = o.model.overrides();
  o.resolve_default_data();
  analysis::LayerAnalysisOptions layer;
  layer.max_images = block.max_images;
  return analysis::LayerAnalysis::open(
      o.session, layer,
      [&](const analysis::ExtractionProgress& p) {
        return report_progress("reading samples", p.samples_done, p.samples_total, p.elapsed_seconds, p.eta_seconds,
                               o.quiet);
      },
      open_steps(o, o.session.cache_path));
}

}  // namespace mumoe::cli
