// mumoe stats MODEL --data SPEC [--mode E] [--threshold 0.5]: expert load, dead experts, top
// classes, gate sparsity H_s, utilisation H_u and I(E;Y) (spec §4).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iomanip>
#include <iostream>

#include "analysis/result_json.h"
#include "analysis_options.h"
#include "cli_support.h"

namespace mumoe::cli {
namespace {

struct StatsOptions {
  AnalysisCliOptions analysis;
  int64_t mode = 0;
  double threshold = 0.5;
  int64_t show = 20;
};

int run_stats(StatsOptions& o) {
  auto session = open_analysis(o.analysis);
  const auto answer = session->statistics(o.mode, o.threshold);
  const auto& s = answer.value;
  if (o.analysis.json) {
    auto j = analysis::to_json(s);
    j["class_names"] = session->class_names();
    j["from_cache"] = answer.from_cache;
    j["seconds"] = answer.seconds;
    std::cout << j.dump(2) << "\n";
    return kSuccess;
  }
  std::cout << std::fixed << std::setprecision(3) << "expert mode " << s.mode << ": " << s.experts.size()
            << " experts, " << s.samples << " samples, threshold " << s.threshold << "\n"
            << "  dead experts            " << s.dead_experts << "\n"
            << "  active experts / sample " << s.mean_active_experts << "\n"
            << "  gate entropy H_s        " << s.gate_entropy_bits << " bits\n"
            << "  utilisation H_u         " << s.utilisation_entropy_bits << " bits\n"
            << "  I(E;Y)                  " << s.mutual_information_bits << " bits (H(E) " << s.expert_entropy_bits
            << ", H(Y) " << s.class_entropy_bits << ")\n";
  auto order = s.experts;
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.load > b.load; });
  std::cout << "  busiest experts (load = samples with a_n ≥ threshold):\n";
  for (int64_t i = 0; i < std::min<int64_t>(o.show, static_cast<int64_t>(order.size())); ++i) {
    const auto& e = order[i];
    std::cout << "    expert " << std::setw(4) << e.expert << "  load " << std::setw(6) << e.load << "  top:";
    for (const auto& [c, n] : e.top_classes) std::cout << " " << class_name(*session, c) << " (" << n << ")";
    std::cout << "\n";
  }
  return kSuccess;
}

}  // namespace

Command add_stats_command(CLI::App& parent) {
  auto o = std::make_shared<StatsOptions>();
  auto* app = parent.add_subcommand("stats", "Expert statistics: load, dead experts, top classes, entropies, I(E;Y)");
  o->analysis.add_to(app);
  app->add_option("--mode", o->mode, "Expert mode (hierarchical layers; default 0)");
  app->add_option("--threshold", o->threshold, "Coefficient that counts towards an expert's load (default 0.5)");
  app->add_option("--show", o->show, "Experts listed in the text output (default 20)");
  return {app, [o]() { return run_stats(*o); }};
}

}  // namespace mumoe::cli
