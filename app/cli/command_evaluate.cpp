// mumoe evaluate MODEL --data SPEC [--ablate 3,17] [--json]: accuracy overall and per class, of
// an image classifier on image data or of a bare μMoE layer on a feature file.
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <iomanip>
#include <iostream>

#include "cli_support.h"
#include "io/file_checks.h"
#include "language_model.h"
#include "data/dataset.h"
#include "io/errors.h"
#include "model/classifier_model.h"
#include "train/classifier_training.h"

#include "model_options.h"

namespace mumoe::cli {
namespace {

struct EvaluateOptions {
  ModelOptions model;
  std::string data = "fashion-mnist:test", ablate, device = "cpu", layer;
  int64_t batch_size = 500;
  double validation_fraction = 0.05;
  int64_t max_tokens = 1 << 20;
  bool json = false;

  /// Declares these options on the command `app`.
  void add_to(CLI::App* app) {
    model.add_to(app);
    app->add_option("--data", data, "Data SPEC (default fashion-mnist:test; features:FILE for a bare layer)");
    app->add_option("--layer", layer, "μMoE layer of a multi-layer model file");
    app->add_option("--max-tokens", max_tokens,
                    "GPT models on tokens:FILE (nanoGPT's val.bin): evaluate the stream's first N tokens (default "
                    "1,048,576; 0 = all)")
        ->check(CLI::NonNegativeNumber);
    app->add_option("--validation-fraction", validation_fraction,
                    "GPT on a text SPEC: the held-out share of documents it was trained with (default 0.05)");
    app->add_option("--ablate", ablate, "Experts of the head to ablate: 3,17 or MODE:EXPERT");
    app->add_option("--batch-size", batch_size, "Batch size (default 500)");
    add_device_option(app, device);
    add_json_flag(app, json);
  }
};

int run_evaluate(const EvaluateOptions& o) {
  const auto ablation = o.ablate.empty() ? nn::ExpertAblation{} : parse_ablation(o.ablate);
  if (is_text_spec(o.data))
    return run_evaluate_language_model(o.model.model, o.data, o.validation_fraction, o.device, o.json,
                                       {o.model.heads, o.model.tokenizer, o.max_tokens});
  const auto file = model::ModelFile::load(o.model.model, o.model.overrides());
  auto classifier = model::ClassifierModel::load(file, o.layer);
  const auto data = classifier.prepare(data::load_dataset(o.data));
  classifier.check_compatible(data);
  const auto& names = classifier.multilabel() ? data.target_names : data.class_names;
  const auto start = std::chrono::steady_clock::now();
  const auto e = train::evaluate_classifier(classifier, data, o.batch_size, o.device, ablation);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (o.json) {
    std::cout << json_text(nlohmann::json({{"model", o.model.model},
                                 {"data", o.data},
                                 {"samples", e.samples},
                                 {"accuracy", e.accuracy},
                                 {"mean_loss", e.mean_loss},
                                 {"task", classifier.multilabel() ? "multilabel" : "multiclass"},
                                 {"class_names", names},
                                 {"per_class_accuracy", e.per_class_accuracy},
                                 {"per_class_count", e.per_class_count},
                                 {"ablated", o.ablate},
                                 {"seconds", seconds}}))
              << "\n";
    return 0;
  }
  std::cout << o.model.model << " on " << o.data << " (" << e.samples << " samples"
            << (o.ablate.empty() ? "" : ", experts " + o.ablate + " ablated") << ")\n"
            << "  accuracy " << std::fixed << std::setprecision(4) << e.accuracy << ", mean loss " << e.mean_loss
            << "\n";
  for (size_t c = 0; c < e.per_class_accuracy.size(); ++c)
    std::cout << "  " << std::left << std::setw(14) << io::printable(names[c]) << std::right << std::setw(8)
              << e.per_class_accuracy[c] << "  (" << e.per_class_count[c] << ")\n";
  return kSuccess;
}

}  // namespace

Command add_evaluate_command(CLI::App& parent) {
  return make_command<EvaluateOptions>(parent, "evaluate",
                                       "Accuracy of a classifier, overall and per class",
                                       run_evaluate);
}

}  // namespace mumoe::cli
