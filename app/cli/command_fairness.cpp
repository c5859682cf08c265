// mumoe fairness MODEL --data SPEC --target ATTR --sensitive ATTR [--subpop 'T=1&S=1'] [--json]:
// accuracy of a multi-label model's target output over the four subpopulations target ×
// sensitive, and the fairness metrics of spec §5 (equality of opportunity, STD bias, Max-Min,
// target-subpopulation accuracy; the worst cell when --subpop is not given).
#include <iostream>

#include "bias_options.h"
#include "bias_report.h"
#include "cli_support.h"
#include "io/errors.h"

namespace mumoe::cli {
namespace {

struct FairnessOptions {
  BiasCliOptions bias;
  std::string target, sensitive, subpopulation;

  /// Declares these options on the command `app`.
  void add_to(CLI::App* app) {
    bias.add_to(app, /*with_train=*/false);
    app->add_option("--target", target, "Target attribute (an output of the model)")->required();
    app->add_option("--sensitive", sensitive, "Sensitive attribute of the data")->required();
    app->add_option("--subpop", subpopulation,
                    "Target subpopulation, e.g. 'long_sleeves=1&frame=1' (default: the worst-served cell)");
  }
};

int run_fairness(const FairnessOptions& o) {
  auto task = o.subpopulation.empty() ? editing::cell_task(o.target, 1, o.sensitive, 1)
                                       : editing::make_bias_task(o.target, o.subpopulation, o.sensitive);
  const auto study = open_bias_study(o.bias, /*with_train=*/false, task_attributes(task));
  if (o.subpopulation.empty()) {
    // No cell named: the target subpopulation is the worst-served one.
    if (const auto cell = editing::worst_cell(study.fairness(task)))
      task = editing::cell_task(o.target, cell->first, task.sensitive, cell->second);
  }
  const auto v = study.measure(task, "model", study.test().logits);
  if (o.bias.json) {
    auto j = editing::to_json(v);
    j["model"] = o.bias.model;
    j["data"] = o.bias.data;
    j["target"] = task.target;
    j["sensitive"] = task.sensitive;
    j["subpopulation"] = task.subpopulation.text();
    j["target_names"] = study.target_names();
    std::cout << json_text(j) << "\n";
    return kSuccess;
  }
  std::cout << o.bias.model << " on " << o.bias.data << ": output " << task.target << ", sensitive attribute "
            << task.sensitive << "\n";
  print_variants(std::cout, task, {v});
  return kSuccess;
}

}  // namespace

Command add_fairness_command(CLI::App& parent) {
  return make_command<FairnessOptions>(parent, "fairness",
                                       "Fairness metrics of a multi-label model over 4 subpopulations",
                                       run_fairness);
}

}  // namespace mumoe::cli
