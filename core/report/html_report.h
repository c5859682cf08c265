// A self-contained HTML report of one layer's experts (`mumoe report`, the GUI's Export Report):
// one file, images embedded as data: URIs, charts as inline SVG, the table sorted and filtered by
// a few lines of inline script — no network, no server, opens from disk in any browser.
//
// This file only renders: what goes in (ExpertReport) is computed by the analysis core
// (analysis/expert_report.h) from the same calls as the CLI's JSON and the GUI's pages, so the
// report's numbers are theirs. Plain C++ (no LibTorch, Qt or OpenCV).
//
// The page's structure, which tests and scripts may rely on:
//   <table id="experts">, one <tr data-expert="N"> per expert with <td data-key="K"
//   data-value="V"> cells for K in load, support, delta_accuracy, polysemanticity, mean_coefficient
//   (and delta_loss for a language model);
//   <section class="expert" id="expert-N"> per expert shown in detail, with its gallery
//   (<figure class="tile"> … <img src="data:image/png;base64,…">; a language model's:
//   <div class="context"> lines with the token in <mark>), its class histogram and its ablation
//   chart (<svg class="chart">); a multi-label model's <table id="bias"> (BiasSection);
//   `compare`'s <table id="comparison">, one <tr data-model="FILE"> per model with <td
//   data-key="K" data-value="V"> cells for K in experts, accuracy, mean_polysemanticity,
//   class_purity, information_ratio, load_cv, dead_experts, dropped_tokens, and its chart
//   <svg class="chart comparison"> (ComparisonSection). Tables with class "sortable" sort by a
//   click on a header.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mumoe::report {

struct Tile {
  std::string png;        ///< PNG bytes of the thumbnail, at display size ("" = no image)
  std::string label;      ///< the sample's class name
  std::string prediction; ///< the model's predicted class name
  double coefficient = 0;
  bool outlined = false;  ///< a patch is outlined (a backbone layer's strongest patch)
};

/// A token of a language model's gallery, in its context (display text, analysis/lm_eval_set.h).
struct ContextLine {
  std::string before, token, after;
  std::string target, prediction;  ///< the next token and the model's guess, as display text
  double coefficient = 0;
};

struct ExpertRow {
  int64_t expert = 0;
  int64_t load = 0, support = 0;
  double mean_coefficient = 0;
  bool has_ablation = false;
  double delta_accuracy = 0;   ///< accuracy after ablating the expert − before (percentage points / 100)
  double polysemanticity = 0;  ///< p^(n) (NaN when the ablation changed nothing)
  std::vector<std::pair<std::string, int64_t>> top_classes;  ///< (class name, samples), most first
  bool has_loss = false;       ///< a language model: its next-token loss
  double delta_loss = 0;       ///< mean loss after ablating − before, nats/token
};

struct ExpertDetail {
  int64_t expert = 0;
  std::string gallery_title;               ///< e.g. "32 random with a ≥ 0.50 of 812"
  std::vector<Tile> tiles;
  std::vector<int64_t> class_histogram;    ///< samples routed mainly to the expert, per class
  std::vector<double> accuracy_change;     ///< per class, after − before (empty: no ablation)
  std::vector<ContextLine> contexts;       ///< a language model's gallery: tokens in context
  std::string ablation_summary;            ///< one line on the ablation ("" = none)
};

/// A multi-label model's bias correction (issue 49): the four cells of target × sensitive attribute
/// and the fairness metrics, one column per variant of the model (as opened, with its edits, the
/// baselines). Rendered as <table id="bias"> with <td data-variant="V" data-value="X"> cells.
struct BiasSection {
  std::string title;                 ///< e.g. "Output long_sleeves, sensitive attribute frame"
  std::vector<std::string> columns;  ///< the variants' names
  struct Row {
    std::string label;
    bool highlighted = false;    ///< the target subpopulation's cell
    bool percent = true;         ///< a fraction shown as a percentage; else a plain number
    std::vector<double> values;  ///< one per column; NaN = not measured
  };
  std::vector<Row> rows;
  std::string note;  ///< under the table (what * and MRS mean)
};

/// `mumoe compare`'s rows in a report (issue 49): one model's layer per row, all on the report's
/// data, and the chart of mean polysemanticity against the number of experts (the paper's Fig. 3),
/// a point per row labelled with its model. NaN figures are drawn as "—" (and no point).
struct ComparisonSection {
  struct Row {
    std::string model;   ///< the file's name
    std::string layer;
    std::string kind;    ///< e.g. "μMoE CP entmax15", "Soft MoE"
    int64_t experts = 0;
    int64_t experts_with_effect = 0;
    double accuracy = 0;
    double mean_polysemanticity = 0;
    double class_purity = 0;
    double information_ratio = 0;
    double load_cv = 0;
    int64_t dead_experts = 0;
    int64_t dropped_tokens = 0;
  };
  std::string data;  ///< the data SPEC every row was computed on
  std::vector<Row> rows;
};

struct ExpertReport {
  std::string title;                    ///< e.g. the model's file name
  /// The model card, in order: (field, value) — architecture, layer, data, samples, accuracy,
  /// provenance, app version, generated.
  std::vector<std::pair<std::string, std::string>> card;
  std::vector<std::string> class_names;
  std::vector<double> class_accuracy;   ///< before any ablation, per class
  std::vector<ExpertRow> experts;       ///< every expert of the mode
  std::vector<ExpertDetail> details;    ///< the experts shown in detail, in order
  bool has_sweep = false;               ///< every row has its ablation: draw the sweep chart
  /// A multi-label model's bias table (then `experts` is usually empty: no expert table is drawn).
  std::optional<BiasSection> bias;
  /// `compare`'s table and chart (`mumoe report --compare`).
  std::optional<ComparisonSection> comparison;
};

/// The whole page. Text is HTML-escaped; numbers are written with enough digits to compare.
std::string render_html(const ExpertReport& report);

/// The current time as the card's "generated" field shows it: "2026-11-28 17:05 UTC".
std::string utc_now_text();
/// The last component of a path ("dir/model.pth" → "model.pth").
std::string file_name(const std::string& path);

/// RFC 4648 base64 (for data: URIs).
std::string base64(const std::string& bytes);
/// &, <, >, " and ' escaped.
std::string escape_html(const std::string& text);

}  // namespace mumoe::report
