// mumoe predict MODEL --data SPEC --output F.safetensors [--coefficients] [--limit N]: the model's
// logits on the data and, with --coefficients, every expert layer's coefficients under the layer's
// name (analysis/predictions.h) — one file to compare with what one's own PyTorch computes.
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <chrono>
#include <iostream>

#include "analysis/predictions.h"
#include "analysis_options.h"
#include "cli_support.h"
#include "data/dataset.h"
#include "io/errors.h"
#include "io/output_files.h"
#include "io/safetensors.h"
#include "model/classifier_model.h"
#include "model/model_file.h"
#include "model_options.h"

namespace mumoe::cli {
namespace {

struct PredictOptions {
  ModelOptions model;
  std::string data = "fashion-mnist:test", output, layer, device = "cpu";
  int64_t batch_size = 64, limit = 0;
  bool coefficients = false, json = false, quiet = false;
};

int run_predict(const PredictOptions& o) {
  io::check_outputs({{o.output, "--output"}}, {{o.model.model, "the model"},
                                              {data::feature_file_of(o.data), "the --data file"},
                                              {o.model.backbone, "the TorchScript backbone"},
                                              {o.model.class_names, "--class-names"}});
  catch_interrupts();
  const auto file = model::ModelFile::load(o.model.model, o.model.overrides());
  auto classifier = model::ClassifierModel::load(file, o.layer);
  const auto data = classifier.prepare(data::load_dataset(o.data));
  const auto start = std::chrono::steady_clock::now();
  const auto p = analysis::predict(classifier, data, o.limit, o.batch_size, o.coefficients, o.device,
                                   [&](int64_t done, int64_t total) {
                                     const double elapsed =
                                         std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
                                     return report_progress("predicting", done, total, elapsed,
                                                            elapsed / static_cast<double>(done) * static_cast<double>(total - done),
                                                            o.quiet || o.json);
                                   });
  std::vector<io::NamedTensor> tensors = {{"logits", p.logits}};
  nlohmann::json shapes = {{"logits", p.logits.sizes().vec()}};
  for (const auto& [name, coefficients] : p.coefficients) {
    if (name == "logits") throw UsageError("a layer named 'logits' would collide with the logits");
    tensors.push_back({name, coefficients});
    shapes[name] = coefficients.sizes().vec();
  }
  io::write_safetensors(o.output, tensors, {{"mumoe.model", o.model.model}, {"mumoe.data", o.data}});
  if (o.json) {
    std::cout << json_text(nlohmann::json({{"output", o.output}, {"samples", p.logits.size(0)}, {"tensors", shapes}}))
              << "\n";
  } else {
    std::cout << "wrote " << o.output << ":\n";
    for (const auto& [name, shape] : shapes.items()) std::cout << "  " << io::printable(name) << " " << shape.dump() << "\n";
  }
  return kSuccess;
}

}  // namespace

Command add_predict_command(CLI::App& parent) {
  auto o = std::make_shared<PredictOptions>();
  auto* app = parent.add_subcommand(
      "predict", "Write a classifier's logits (and every expert layer's coefficients) on data, to compare with PyTorch");
  o->model.add_to(app);
  app->add_option("--data", o->data, "Data SPEC (default fashion-mnist:test; features:FILE for a bare layer)");
  app->add_option("--output", o->output, "Safetensors file to write: logits, and each layer's coefficients by name")
      ->required();
  app->add_flag("--coefficients", o->coefficients,
                "Also every expert layer's coefficients: [S, N] for a head, [S, rows, N] inside a ViT or Mixer");
  app->add_option("--layer", o->layer, "The μMoE layer of a file of several bare layers");
  app->add_option("--limit", o->limit, "Only the first N samples (default 0 = all)")->check(CLI::NonNegativeNumber);
  app->add_option("--batch-size", o->batch_size, "Samples per forward pass (default 64)")->check(CLI::PositiveNumber);
  app->add_option("--device", o->device, "cpu (default) or cuda[:N]");
  app->add_flag("--json", o->json, "Print JSON");
  app->add_flag("--quiet", o->quiet, "No progress on stderr");
  return {app, [o]() { return run_predict(*o); }};
}

}  // namespace mumoe::cli
