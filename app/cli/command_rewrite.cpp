// mumoe rewrite MODEL --data SPEC --target ATTR --subpop 'A=1&B=1' [--lambda X] [--blind]
//   [--baselines] [--output OUT [--layout auto|mumoe|reference|source]] [--edits-out FILE] [--session DB]
//   [--json]
// The expert-conditional logit rewrite of spec §5: ā from the subpopulation's TRAINING samples,
// λ = N toward the under-predicted label by default; metrics before and after on the test split
// (and, with --baselines, the blind-threshold and oversampling baselines). With --output the
// edit is folded into the weights, written and verified.
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>

#include "bias_options.h"
#include "bias_report.h"
#include "cli_support.h"
#include "editing/edit_stack.h"
#include "editing/logit_rewrite.h"
#include "editing/model_export.h"
#include "io/atomic_file.h"
#include "io/errors.h"
#include "io/output_files.h"
#include "data/dataset.h"
#include "model/model_file.h"
#ifdef MUMOE_WITH_ANALYSIS
#include "analysis/content_hash.h"
#include "cache/analysis_cache.h"
#include "editing/edit_session_store.h"
#endif

namespace mumoe::cli {
namespace {

struct RewriteOptions {
  BiasCliOptions bias;
  std::string target, subpopulation, sensitive;
  std::optional<double> lambda;
  bool blind = false, baselines = false;
  editing::OversampleOptions oversample;
  std::string output, layout = "auto", edits_out, session;
  bool overwrite = false;

  /// Declares these options on the command `app`.
  void add_to(CLI::App* app) {
    bias.add_to(app, /*with_train=*/true);
    app->add_option("--target", target, "Output to edit (a target attribute of the model)")->required();
    app->add_option("--subpop", subpopulation, "Subpopulation whose training samples define ā, e.g. 'long_sleeves=1&frame=1'")
        ->required();
    app->add_option("--sensitive", sensitive, "Sensitive attribute (default: the predicate's non-target attribute)");
    app->add_option("--lambda", lambda, "λ, sign included (default: N, signed toward the under-predicted label)")
        ->check(CLI::Validator(
            [](std::string& text) {
              char* end = nullptr;
              const double v = std::strtod(text.c_str(), &end);
              return std::isfinite(v) ? std::string() : "λ must be a finite number, not " + text;
            },
            "FINITE"));
    app->add_flag("--blind", blind, "The blind-threshold baseline instead: ā = 1, |λ| = 2.5");
    app->add_flag("--baselines", baselines, "Also evaluate the blind-threshold and oversampling baselines");
    app->add_option("--oversample-epochs", oversample.epochs, "Oversampling baseline: epochs (default 5)");
    app->add_option("--seed", oversample.seed, "Oversampling baseline: seed (default 0)");
    app->add_option("--output", output, "Fold the edit into the weights and write the model here (verified)");
    app->add_option("--layout", layout,
                    "auto (default: source for a model opened from a PyTorch state dict, else mumoe), mumoe, reference "
                    "(a plain state_dict in the reference keys) or source (the opened file's own keys and format)");
    app->add_flag("--overwrite", overwrite, "Replace an existing --output (required to replace the source model)");
    app->add_option("--edits-out", edits_out, "Also write the edit as JSON (for mumoe export --edits)");
    app->add_option("--session", session,
                    "Edit-session database (SQLite): the edits applied there come first (metrics, --output), and "
                    "this edit is appended");
  }
};

void write_text_atomically(const std::string& path, const std::string& text) {
  io::AtomicFileWriter w(path);
  w.write(text.data(), text.size());
  w.commit();
}

// Every input of the command, for the output guard: a mistyped --edits-out must not replace the
// model, the data, the analysis cache or the edit session.
std::vector<io::NamedInput> rewrite_inputs(const RewriteOptions& o) {
  std::vector<io::NamedInput> inputs = {{o.bias.model, "the model"}, {o.session, "--session"}};
  for (const auto& spec : {o.bias.data, o.bias.train_data})
    if (const auto file = data::feature_file_of(spec); !file.empty()) inputs.push_back({file, "a data file"});
#ifdef MUMOE_WITH_ANALYSIS
  if (!o.bias.no_cache)
    inputs.push_back({o.bias.cache.empty() ? cache::default_cache_path() : o.bias.cache, "the analysis cache"});
#endif
  return inputs;
}

int run_rewrite(RewriteOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  // The source model may be the --output only with --overwrite (export_edited_model decides);
  // nothing else may be.
  auto inputs = rewrite_inputs(o);
  if (o.overwrite) inputs.erase(inputs.begin());
  io::check_outputs({{o.output, "--output"},
                     {o.output.empty() ? "" : model::manifest_sidecar_path(o.output), "--output's manifest"},
                     {o.edits_out, "--edits-out"}},
                    inputs);
  const auto task = editing::make_bias_task(o.target, o.subpopulation, o.sensitive);
  // With --session the new edit combines with the edits already applied there: "before" is the
  // model with those, "after" adds this one, and --output folds them all.
  editing::EditStack stack;
#ifdef MUMOE_WITH_ANALYSIS
  std::unique_ptr<editing::EditSessionStore> store;
  std::string model_hash;
  if (!o.session.empty()) {
    store = editing::EditSessionStore::open(o.session);
    model_hash = analysis::hash_file(o.bias.model);
    if (auto stored = store->load(model_hash)) {
      if (!stored->damaged.empty())
        throw UsageError(o.session + " holds " + std::to_string(stored->damaged.size()) + " damaged edit(s) of this "
                         "model (" + stored->damaged.front() + "): remove them with `mumoe edits MODEL --session " +
                         o.session + " --drop-damaged` first");
      stack = stored->stack;
    }
  }
#else
  if (!o.session.empty()) throw UsageError("--session needs a build with SQLite");
#endif
  const auto prior = stack.applied();
  auto study = open_bias_study(o.bias, /*with_train=*/true, task_attributes(task));
  // The same comparison the GUI's Bias page shows (editing::compare_rewrite): "before" is the
  // model with the session's edits, every MRS is measured against it and names it.
  auto comparison = editing::compare_rewrite(study, task, prior, study.make_edit(task, o.lambda, o.blind));
  const auto& edit = comparison.edit;
  auto all_edits = prior;
  all_edits.push_back(edit);
  if (o.baselines) {
    if (!o.blind)
      comparison.baselines.push_back(editing::blind_threshold_baseline(study, task, prior, comparison.before));
    if (!o.bias.quiet) std::cerr << "training the oversampling baseline …\n";
    int64_t factor = 0;
    comparison.baselines.push_back(
        editing::oversample_baseline(study, task, o.oversample, comparison.before, &factor));
    o.oversample.factor = factor;
  }
  std::vector<editing::VariantMetrics> variants = {comparison.before};
  variants.insert(variants.end(), comparison.baselines.begin(), comparison.baselines.end());
  variants.push_back(comparison.after);

  nlohmann::json export_json;
  if (!o.output.empty()) {
    editing::ExportRequest request;
    request.output = o.output;
    request.layout = editing::parse_export_layout(o.layout);
    request.overwrite = o.overwrite;
    const auto source = model::ModelFile::load(o.bias.model);
    auto verify_data = study.model().prepare(data::load_dataset(o.bias.data));
    export_json = editing::to_json(editing::export_edited_model(source, all_edits, verify_data, request));
  }
  if (!o.edits_out.empty())
    write_text_atomically(o.edits_out, json_text(nlohmann::json({{"edits", editing::to_json(all_edits)}})) + "\n");
#ifdef MUMOE_WITH_ANALYSIS
  if (store) {
    stack.push(edit);
    store->save(model_hash, o.bias.model, stack);
  }
#endif

  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (o.bias.json) {
    nlohmann::json j = {{"model", o.bias.model},
                        {"data", o.bias.data},
                        {"train_data", o.bias.training_spec()},
                        {"target", task.target},
                        {"sensitive", task.sensitive},
                        {"subpopulation", task.subpopulation.text()},
                        {"edits", editing::to_json(all_edits)},
                        {"prior_edits", prior.size()},
                        {"before", editing::to_json(comparison.before)},
                        {"after", editing::to_json(comparison.after)},
                        {"seconds", seconds}};
    if (o.baselines) {
      nlohmann::json b = nlohmann::json::object();
      for (const auto& baseline : comparison.baselines) b[baseline.name] = editing::to_json(baseline);
      b["oversample"]["repeat_factor"] = o.oversample.factor;
      b["oversample"]["epochs"] = o.oversample.epochs;
      j["baselines"] = b;
    }
    if (!export_json.is_null()) j["export"] = export_json;
    std::cout << json_text(j) << "\n";
    return kSuccess;
  }
  for (const auto& e : prior) std::cout << "applied before (session): " << e.describe() << "\n";
  std::cout << "edit: " << edit.describe() << "\n\n";
  print_variants(std::cout, task, variants);
  if (!export_json.is_null())
    std::cout << "\nwrote " << o.output << " (" << o.layout << " layout); reloaded and compared on "
              << export_json["verified_samples"] << " samples: max |difference| = "
              << export_json["max_abs_difference"].get<double>() << "\n";
  if (!o.session.empty()) std::cout << "saved the edit in session " << o.session << "\n";
  return kSuccess;
}

}  // namespace

Command add_rewrite_command(CLI::App& parent) {
  return make_command<RewriteOptions>(parent, "rewrite",
                                      "Correct a subpopulation's bias with an expert-conditional logit rewrite",
                                      run_rewrite);
}

}  // namespace mumoe::cli
