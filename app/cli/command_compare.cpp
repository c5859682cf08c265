// mumoe compare MODEL... --data SPEC: one row per model — μMoE layers beside the router study's
// sparse and soft MoE layers on the same data — with accuracy, mean polysemanticity, class
// purity, I(E;Y)/H(Y), load balance, dead experts, dropped samples and cost per sample
// (analysis::compare_layer, the same call the GUI's Compare page makes). Extractions and sweeps
// are cached, so a second run reads them back.
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "analysis/layer_comparison.h"
#include "analysis_options.h"
#include "cli_support.h"
#include "io/errors.h"

namespace mumoe::cli {
namespace {

struct CompareOptions {
  AnalysisCliOptions analysis;
  std::vector<std::string> models;

  /// Declares these options on the command `app`.
  void add_to(CLI::App* app) {
    app->add_option("models", models, "Model files (one row each)")->required();
    app->add_option("--data", analysis.session.data_spec,
                    "Data SPEC (default fashion-mnist:test; features:FILE for bare layers)");
    app->add_option("--layer", analysis.session.layer, "Layer to analyse in each model (default: its only one)");
    app->add_option("--cache", analysis.session.cache_path,
                    "Analysis cache file (default $MUMOE_CACHE, else ~/.cache/mumoe-studio/analysis.sqlite)");
    add_device_option(app, analysis.session.device);
    add_json_flag(app, analysis.json, "Print JSON (one object per model)");
    add_quiet_flag(app, analysis.quiet);
  }
};

std::string figure(double v, int precision) {
  if (!std::isfinite(v)) return "—";
  std::ostringstream out;
  out << std::fixed << std::setprecision(precision) << v;
  return out.str();
}

/// `text` padded with spaces to `width` characters (UTF-8 code points: "μ" is one), cut with
/// "..." when longer.
std::string padded(std::string text, size_t width) {
  auto length = [](const std::string& t) {
    size_t n = 0;
    for (const unsigned char c : t) n += (c & 0xC0) != 0x80;
    return n;
  };
  if (length(text) > width) {
    while (length(text) > width - 3) text.pop_back();
    while (!text.empty() && (static_cast<unsigned char>(text.back()) & 0xC0) == 0xC0) text.pop_back();
    text += "...";
  }
  return text + std::string(width - length(text), ' ');
}

void print_table(const std::vector<analysis::LayerComparison>& rows) {
  std::cout << std::left << std::setw(36) << "model" << std::setw(24) << "layer kind" << std::right << std::setw(6)
            << "N" << std::setw(9) << "params" << std::setw(9) << "acc %" << std::setw(8) << "poly" << std::setw(9)
            << "effect" << std::setw(8) << "purity" << std::setw(8) << "I/H(Y)" << std::setw(8) << "load CV"
            << std::setw(6) << "dead" << std::setw(9) << "dropped" << std::setw(10) << "kFLOP/s." << std::setw(9)
            << "µs/s." << "\n";
  for (const auto& r : rows) {
    const auto name = r.model_path.substr(r.model_path.find_last_of('/') + 1);
    const auto kind = r.family.rfind("μMoE", 0) == 0 ? r.family + " " + r.gate : r.family;
    std::cout << padded(name, 35) << " " << padded(kind, 23) << " " << std::right << std::setw(6) << r.experts << std::setw(9) << r.parameters << std::setw(9)
              << figure(100 * r.accuracy, 2) << std::setw(8) << figure(r.mean_polysemanticity, 3) << std::setw(9)
              << (std::to_string(r.experts_with_effect) + "/" + std::to_string(r.experts)) << std::setw(8)
              << figure(r.mean_class_purity, 3) << std::setw(8) << figure(r.information_ratio, 3) << std::setw(8)
              << figure(r.load_cv, 2) << std::setw(6) << r.dead_experts << std::setw(9) << r.dropped_tokens
              << std::setw(10) << figure(2 * r.multiply_adds_per_sample / 1000, 1) << std::setw(9)
              << figure(r.microseconds_per_sample, 2) << "\n";
  }
}

int run_compare(CompareOptions& o) {
  std::vector<analysis::LayerComparison> rows;
  nlohmann::json out = nlohmann::json::array();
  int failures = 0;
  for (const auto& model : o.models) {
    auto options = o.analysis.session;
    options.model_path = model;
    options.overrides = o.analysis.model.overrides();
    const auto start = std::chrono::steady_clock::now();
    try {
      auto row = analysis::compare_layer(options, [&](const std::string& step, int64_t done, int64_t total, double eta) {
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        return report_progress(model + ": " + step, done, total, elapsed, eta, o.analysis.quiet);
      });
      out.push_back(analysis::to_json(row));
      rows.push_back(std::move(row));
    } catch (const Cancelled&) {
      throw;
    } catch (const std::exception& e) {
      // One unreadable model does not lose the others' rows; the exit code says it.
      ++failures;
      std::cerr << "mumoe compare: " << e.what() << "\n";
      out.push_back({{"model", model}, {"error", e.what()}});
    }
  }
  if (o.analysis.json)
    std::cout << json_text(out) << "\n";
  else
    print_table(rows);
  return failures ? kBadInput : kSuccess;
}

}  // namespace

Command add_compare_command(CLI::App& parent) {
  return make_command<CompareOptions>(parent, "compare",
                                      "Compare expert layers (μMoE and sparse/soft MoE routers) on one data set: accuracy, "
                                      "polysemanticity, purity, I(E;Y)/H(Y), load, dropped samples, cost",
                                      run_compare);
}

}  // namespace mumoe::cli
