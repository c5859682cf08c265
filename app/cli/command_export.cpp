// mumoe export MODEL (--edits FILE | --session DB | --remove-experts LAYER:LIST…) --output OUT
//   [--layout auto|mumoe|reference|source] [--data SPEC] [--overwrite] [--json]
// Folds saved edits into the model's weights, or removes experts for good (their weights zeroed,
// what ablation computes), writes it and verifies the written file against the live-edited model
// (model_export.h). The source model is never modified.
#include <iostream>
#include <limits>

#include "cli_support.h"
#include "data/dataset.h"
#include "editing/bias_session.h"
#include "editing/logit_rewrite.h"
#include "editing/model_export.h"
#include "io/errors.h"
#include "io/output_files.h"
#include "io/file_checks.h"
#include "model/classifier_model.h"
#include "model/manifest.h"
#include "model/model_file.h"
#include "model/model_file.h"
#ifdef MUMOE_WITH_ANALYSIS
#include "editing/edit_session_store.h"
#endif

#include "model_options.h"

namespace mumoe::cli {
namespace {

struct ExportOptions {
  ModelOptions model;
  std::string edits, session, output, layout = "auto", data;
  std::vector<std::string> remove_experts;  ///< LAYER:LIST, one per layer
  bool overwrite = false, json = false;
  int64_t verify_samples = 256;

  /// Declares these options on the command `app`.
  void add_to(CLI::App* app) {
    model.add_to(app);  // MODEL (the unedited model) and what a plain state dict cannot say
    app->add_option("--edits", edits, "Edits JSON (from mumoe rewrite --edits-out or --json)");
    app->add_option("--session", session, "Edit-session database holding this model's edits");
    app->add_option("--remove-experts", remove_experts,
                    "LAYER:EXPERTS (e.g. mixer_blocks.1.1.fn:3,7; repeat per layer): write the model with these experts "
                    "removed (W_n := 0, what `mumoe ablate` measures); the layer's shapes stay")
        ->expected(1)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    app->add_option("--output", output, "Model file to write")->required();
    app->add_option("--layout", layout,
                    "auto (default: source for a model opened from a PyTorch state dict, else mumoe), mumoe (model file "
                    "with manifest), reference (plain state_dict in the reference keys) or source (the opened file's "
                    "own keys and format: .pth or safetensors)");
    app->add_option("--data", data,
                    "Data SPEC to verify on (default: the first edit's training data; fashion-mnist:test for "
                    "--remove-experts)");
    app->add_option("--verify-samples", verify_samples, "Samples compared after writing (default 256)")
        ->check(CLI::Range(int64_t{1}, std::numeric_limits<int64_t>::max()));
    app->add_flag("--overwrite", overwrite, "Replace an existing output (required to replace the source model)");
    add_json_flag(app, json);
  }
};

std::vector<editing::LogitEdit> load_edits(const ExportOptions& o) {
  if (o.edits.empty() == o.session.empty()) throw UsageError("give exactly one of --edits FILE and --session DB");
  if (!o.edits.empty()) return editing::read_edits_file(o.edits);
#ifdef MUMOE_WITH_ANALYSIS
  return editing::applied_session_edits(o.session, o.model.model);
#else
  throw UsageError("--session needs a build with SQLite");
#endif
}

editing::ExportRequest export_request(const ExportOptions& o) {
  editing::ExportRequest request;
  request.output = o.output;
  request.layout = editing::parse_export_layout(o.layout);
  request.overwrite = o.overwrite;
  request.verify_samples = o.verify_samples;
  return request;
}

void print_json(const editing::ExportReport& report, const ExportOptions& o, const std::string& spec) {
  auto j = editing::to_json(report);
  j["model"] = o.model.model;
  j["verify_data"] = spec;
  std::cout << json_text(j) << "\n";
}

// The default verification data of a removal: what the analysis commands default to.
constexpr const char* kDefaultRemovalData = "fashion-mnist:test";

int run_removal(const ExportOptions& o) {
  if (!o.edits.empty() || !o.session.empty())
    throw UsageError("give either --remove-experts or --edits/--session, not both (export removes experts or folds "
                     "edits, one at a time)");
  std::vector<editing::ExpertRemoval> removals;
  for (const auto& text : o.remove_experts) removals.push_back(editing::parse_expert_removal(text));
  const auto source = model::ModelFile::load(o.model.model, o.model.overrides());
  // A multi-label model is verified on the bias workflow's test data (its outputs are attributes).
  const std::string spec = !o.data.empty()                                 ? o.data
                           : source.manifest().task == model::kMultiLabel ? editing::BiasSessionOptions().test_spec
                                                                          : kDefaultRemovalData;
  const auto report = editing::export_without_experts(source, removals, data::load_dataset(spec), export_request(o));
  if (o.json) {
    print_json(report, o, spec);
  } else {
    std::string removed;
    for (const auto& r : report.removed) {
      std::string list;
      for (const auto n : r.experts) list += (list.empty() ? "" : ",") + std::to_string(n);
      removed += (removed.empty() ? "" : "; ") + r.layer + " expert" + (r.experts.size() == 1 ? " " : "s ") + list;
    }
    std::cout << "wrote " << report.output << " (" << editing::to_string(report.layout) << " layout; removed " << removed
              << "); reloaded and compared with the live ablation on " << report.verified_samples << " samples of "
              << spec << ": max |difference| = " << report.max_abs_difference << "\n";
  }
  return kSuccess;
}

int run_export(const ExportOptions& o) {
  // The source model may be replaced only with --overwrite (export_edited_model and
  // export_without_experts check it); no other input of this command may be the output, nor the
  // output's manifest sidecar.
  std::vector<io::NamedInput> inputs = {{o.edits, "--edits"}, {o.session, "--session"},
                                        {o.model.backbone, "the TorchScript backbone"},
                                        {o.model.class_names, "--class-names"},
                                        {data::feature_file_of(o.data), "the --data file"}};
  io::check_outputs({{o.output, "--output"}, {model::manifest_sidecar_path(o.output), "--output's manifest"}}, inputs);
  if (!o.remove_experts.empty()) return run_removal(o);
  const auto edits = load_edits(o);
  if (edits.empty()) throw UsageError("there are no applied edits to export");
  const auto source = model::ModelFile::load(o.model.model, o.model.overrides());
  // Verification data: --data, else the training data the first edit was made from.
  const std::string spec = o.data.empty() ? edits.front().training_data : o.data;
  if (spec.empty()) throw UsageError("give --data SPEC: samples to verify the exported model on");
  const auto model = model::ClassifierModel::load(source, source.inferred() ? "" : edits.front().layer);
  // Edits that do not fit the model are a fault of the edits' file, reported as bad input.
  try {
    editing::check_edits(model.expert_dims().at(0), model.class_count(), edits);
  } catch (const UsageError& e) {
    throw FileError(o.edits.empty() ? o.session : o.edits, std::string(e.what()) + " (model " + o.model.model + ")");
  }
  const auto data = model.prepare(data::load_dataset(spec));
  const auto report = editing::export_edited_model(source, edits, data, export_request(o));
  if (o.json) {
    print_json(report, o, spec);
  } else {
    std::cout << "wrote " << report.output << " (" << editing::to_string(report.layout) << " layout, " << report.edits
              << (report.edits == 1 ? " edit" : " edits") << " folded); reloaded and compared on "
              << report.verified_samples << " samples of " << spec
              << ": max |difference| = " << report.max_abs_difference << "\n";
  }
  return kSuccess;
}

}  // namespace

Command add_export_command(CLI::App& parent) {
  return make_command<ExportOptions>(parent, "export",
                                     "Fold saved edits into a model and write it (verified after writing)",
                                     run_export);
}

}  // namespace mumoe::cli
