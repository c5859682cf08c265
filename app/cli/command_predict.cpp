// mumoe predict MODEL --data SPEC --output F.safetensors [--coefficients] [--limit N]: the model's
// logits on the data and, with --coefficients, every expert layer's coefficients under the layer's
// name (analysis/predictions.h) — one file to compare with what one's own PyTorch computes. A GPT
// is run on the windows its analyses read (the validation split of text, or a token stream's
// first windows) and its input ids are written beside the logits.
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <iostream>

#include "analysis/lm_eval_set.h"
#include "analysis/predictions.h"
#include "analysis/text_analysis_session.h"
#include "analysis_options.h"
#include "cli_support.h"
#include "data/dataset.h"
#include "io/errors.h"
#include "io/output_files.h"
#include "io/safetensors.h"
#include "model/classifier_model.h"
#include "model/gpt_file.h"
#include "model/model_file.h"
#include "model_options.h"

namespace mumoe::cli {
namespace {

struct PredictOptions {
  ModelOptions model;
  std::string data = "fashion-mnist:test", output, layer, device = "cpu";
  int64_t batch_size = 64, limit = 0, max_sequences = analysis::kDefaultLmSequences;
  bool coefficients = false, json = false, quiet = false;

  /// Declares these options on the command `app`.
  void add_to(CLI::App* app) {
    model.add_to(app);
    app->add_option("--data", data, "Data SPEC (default fashion-mnist:test; features:FILE for a bare layer; a GPT: fortunes, text:F or tokens:F)");
    app->add_option("--output", output, "Safetensors file to write: logits, and each layer's coefficients by name")
        ->required();
    app->add_flag("--coefficients", coefficients,
                  "Also every expert layer's coefficients: [S, N] for a head, [S, rows, N] inside a ViT or Mixer, "
                  "[S, T, N] in a GPT");
    app->add_option("--layer", layer, "The μMoE layer of a file of several bare layers");
    app->add_option("--limit", limit, "Only the first N samples (default 0 = all)")->check(CLI::NonNegativeNumber);
    app->add_option("--max-sequences", max_sequences,
                    "A GPT: windows of its context length to run (default 64; 0 = the whole validation split or stream)")
        ->check(CLI::NonNegativeNumber);
    app->add_option("--batch-size", batch_size, "Samples (a GPT: windows) per forward pass (default 64)")->check(CLI::PositiveNumber);
    add_device_option(app, device);
    add_json_flag(app, json);
    add_quiet_flag(app, quiet);
  }
};

// The file a data SPEC reads (features:, tokens:, text:), which the output must not replace.
std::string data_file_of(const std::string& spec) {
  for (const std::string prefix : {"features:", "tokens:", "text:"})
    if (spec.rfind(prefix, 0) == 0) return spec.substr(prefix.size());
  return "";
}

int run_predict(const PredictOptions& o) {
  io::check_outputs({{o.output, "--output"}}, {{o.model.model, "the model"},
                                              {data_file_of(o.data), "the --data file"},
                                              {o.model.backbone, "the TorchScript backbone"},
                                              {o.model.class_names, "--class-names"}});
  catch_interrupts();
  const auto progress = progress_reporter("predicting", o.quiet || o.json);
  analysis::Predictions p;
  if (analysis::is_gpt_model_file(o.model.model)) {
    if (o.limit != 0) throw UsageError("--limit counts images; a GPT's windows are --max-sequences");
    if (!o.layer.empty()) throw UsageError("--layer: a GPT's predictions hold every MLP block's coefficients");
    const auto file = model::ModelFile::load(o.model.model);
    auto gpt = model::load_gpt(file, o.model.heads);
    const auto tokenizer = model::open_gpt_tokenizer(file, gpt->config().vocab_size, o.model.tokenizer);
    const auto split = analysis::training_split(file.manifest().provenance);
    const auto set = analysis::load_lm_eval_set(o.data, split.validation_fraction, split.seed, gpt->config().block_size,
                                                o.max_sequences, tokenizer);
    p = analysis::predict_lm(gpt, set, o.batch_size, o.coefficients, o.device, progress);
  } else {
    const auto file = model::ModelFile::load(o.model.model, o.model.overrides());
    auto classifier = model::ClassifierModel::load(file, o.layer);
    const auto data = classifier.prepare(data::load_dataset(o.data));
    p = analysis::predict(classifier, data, o.limit, o.batch_size, o.coefficients, o.device, progress);
  }
  std::vector<io::NamedTensor> tensors = {{"logits", p.logits}};
  nlohmann::json shapes = {{"logits", p.logits.sizes().vec()}};
  if (p.tokens.defined()) {
    tensors.push_back({"tokens", p.tokens});
    shapes["tokens"] = p.tokens.sizes().vec();
  }
  for (const auto& [name, coefficients] : p.coefficients) {
    if (name == "logits" || name == "tokens")
      throw UsageError("a layer named '" + name + "' would collide with the " + name);
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
  return make_command<PredictOptions>(parent, "predict",
                                      "Write a model's logits (and every expert layer's coefficients) on data, to compare with PyTorch",
                                      run_predict);
}

}  // namespace mumoe::cli
