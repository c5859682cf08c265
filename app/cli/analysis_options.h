// Options and session handling shared by the analysis commands (analyze, stats, gallery,
// ablate): which model, data, layer and cache; progress on stderr; Ctrl-C cancels cleanly.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <string>

#include "analysis/analysis_session.h"
#include "analysis/text_analysis_session.h"
#include "analysis/layer_analysis.h"
#include "analysis/vit_block_analysis.h"
#include "io/file_checks.h"
#include "model_options.h"

namespace mumoe::cli {

struct AnalysisCliOptions {
  ModelOptions model;
  analysis::SessionOptions session;
  bool json = false;
  bool quiet = false;  ///< no progress on stderr
  /// Repair before answering: drop the run's stored answers and damaged chunks, recompute them.
  bool recompute = false;

  void add_to(CLI::App* app);
  /// Without --data, a multi-label model reads the bias workflow's test data (what `fairness` and
  /// the Bias page read: its outputs are that data's attributes), not Fashion-MNIST, which has
  /// none. Reads the model file's header only.
  void resolve_default_data();

 private:
  CLI::Option* data_option_ = nullptr;
};

/// Opens the session, reports a set-aside cache file on stderr, repairs with --recompute, and
/// extracts what the cache lacks with progress on stderr. SIGINT cancels (the command then exits with code 130).
/// `summary` (optional) receives what the extraction computed and reused.
std::unique_ptr<analysis::AnalysisSession> open_analysis(AnalysisCliOptions& options,
                                                         analysis::ExtractionSummary* summary = nullptr);

/// A progress line "LABEL 4500/10000 (45%) 3.2 s, ETA 3.9 s" on stderr, rewritten in place on a
/// terminal and printed every ~10% otherwise; returns false once SIGINT arrived.
bool report_progress(const std::string& label, int64_t done, int64_t total, double elapsed, double eta, bool quiet);

/// report_progress as a callback (done, total), timed from its creation, the ETA from the rate so
/// far: what a long command passes to the core.
std::function<bool(int64_t, int64_t)> progress_reporter(const std::string& label, bool quiet);

/// The files an analysis command reads — the model, a features: data file, the images named by
/// --images, the cache — for io::refuse_output_over_inputs.
std::vector<io::NamedInput> analysis_inputs(const AnalysisCliOptions& options);

/// "Pullover" or "class 7" when the index has no name.
std::string class_name(const analysis::AnalysisSession& session, int64_t c);

/// The options the text path of gallery / ablate adds (μMoE GPT models).
struct TextCliOptions {
  int64_t max_sequences = analysis::kDefaultLmSequences;
  void add_to(CLI::App* app);
};

/// True when the command's MODEL is a μMoE GPT (the text path).
bool is_text_model(const AnalysisCliOptions& options);

/// Opens a text session for a GPT: --data defaults to "fortunes" (its validation split), and
/// `extract` runs the per-token extraction with progress (SIGINT cancels, exit 130).
std::unique_ptr<analysis::TextAnalysisSession> open_text_analysis(AnalysisCliOptions& options,
                                                                  const TextCliOptions& text, bool extract);

/// The options the block path of gallery / ablate adds (a ViT's μMoE MLP, --layer blocks.L.mlp).
struct BlockCliOptions {
  int64_t max_images = 0;  ///< the first N images of --data (0 = all)
  void add_to(CLI::App* app);
};

/// The layer the options name (analysis/layer_analysis.h), whatever its place: a head's extraction
/// or a backbone layer's baseline pass, with progress on stderr (SIGINT cancels, exit 130) and the
/// cache's steps (warnings, --recompute).
std::unique_ptr<analysis::LayerAnalysis> open_layer_analysis(AnalysisCliOptions& options, const BlockCliOptions& block);

}  // namespace mumoe::cli
