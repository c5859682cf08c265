// mumoe stats MODEL --data SPEC [--mode E] [--threshold 0.5]: expert load, dead experts, top
// classes, gate sparsity H_s, utilisation H_u and I(E;Y) (spec §4).
// For a μMoE layer in a ViT or MLP-Mixer backbone (--layer blocks.L.mlp, mixer_blocks.i.1.fn, …) the samples are images, each counted by its
// strongest patch for the expert (analysis::VitBlockAnalysis::statistics).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iomanip>
#include <iostream>

#include "analysis/result_json.h"
#include "io/file_checks.h"
#include "analysis_options.h"
#include "cli_support.h"
#include "io/errors.h"

namespace mumoe::cli {
namespace {

struct StatsOptions {
  AnalysisCliOptions analysis;
  BlockCliOptions block;
  int64_t mode = 0;
  double threshold = 0.5;
  int64_t show = 20;

  /// Declares these options on the command `app`.
  void add_to(CLI::App* app) {
    analysis.add_to(app);
    app->add_option("--mode", mode, "Expert mode (hierarchical layers; default 0)");
    app->add_option("--threshold", threshold, "Coefficient that counts towards an expert's load (default 0.5)");
    app->add_option("--show", show, "Experts listed in the text output (default 20)");
    block.add_to(app);
  }
};

int print_statistics(const StatsOptions& o, const analysis::ModeStatistics& s, const std::vector<std::string>& names,
                     nlohmann::json extra) {
  auto name = [&](int64_t c) {
    return c >= 0 && c < static_cast<int64_t>(names.size()) ? names[c] : "class " + std::to_string(c);
  };
  if (o.analysis.json) {
    auto j = analysis::to_json(s);
    j["class_names"] = names;
    j.update(extra);
    std::cout << json_text(j) << "\n";
    return kSuccess;
  }
  std::cout << std::fixed << std::setprecision(3) << "expert mode " << s.mode << ": " << s.experts.size()
            << " experts, " << s.samples << " samples, threshold " << s.threshold << "\n"
            << "  dead experts            " << s.dead_experts << "\n"
            << "  active experts / sample " << s.mean_active_experts << "\n"
            << "  gate entropy H_s        " << s.gate_entropy_bits << " bits\n"
            << "  utilisation H_u         " << s.utilisation_entropy_bits << " bits\n"
            << (s.multilabel ? "  mean_o I(E;Y_o)         " : "  I(E;Y)                  ")
            << s.mutual_information_bits << " bits (H(E) " << s.expert_entropy_bits
            << (s.multilabel ? ", mean H(Y_o) " : ", H(Y) ") << s.class_entropy_bits << ")\n";
  auto order = s.experts;
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.load > b.load; });
  std::cout << "  busiest experts (load = samples with a_n ≥ threshold):\n";
  for (int64_t i = 0; i < std::min<int64_t>(o.show, static_cast<int64_t>(order.size())); ++i) {
    const auto& e = order[i];
    std::cout << "    expert " << std::setw(4) << e.expert << "  load " << std::setw(6) << e.load
              << (s.multilabel ? "  positive:" : "  top:");
    for (const auto& [c, n] : e.top_classes) std::cout << " " << io::printable(name(c)) << " (" << n << ")";
    std::cout << "\n";
  }
  return kSuccess;
}

int run_stats(StatsOptions& o) {
  auto a = open_layer_analysis(o.analysis, o.block);
  const auto answer = a->statistics(o.mode, o.threshold);
  nlohmann::json extra = {{"layer", a->layer_name()}, {"from_cache", answer.from_cache}, {"seconds", answer.seconds}};
  if (a->multilabel() && !o.analysis.json)
    std::cout << a->layer_name() << " of a multi-label model: its " << a->class_names().size()
              << " outputs stand for classes (positive: the outputs most often true among an expert's samples)\n";
  if (const auto rows = a->sample_rows(); rows.patch_grid > 0) {  // images, each by its strongest row
    extra["images"] = a->samples();
    if (!o.analysis.json)
      std::cout << a->layer_name() << ": " << a->samples() << " images, each counted by its strongest "
                << (rows.rows_are_patches ? "patch" : "channel") << " for an expert\n";
  }
  return print_statistics(o, answer.value, a->class_names(), extra);
}

}  // namespace

Command add_stats_command(CLI::App& parent) {
  return make_command<StatsOptions>(parent, "stats",
                                    "Expert statistics: load, dead experts, top classes, entropies, I(E;Y)",
                                    run_stats);
}

}  // namespace mumoe::cli
