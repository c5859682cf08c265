// mumoe features MODEL --data SPEC --output F.safetensors: the inputs of the model's μMoE head
// for every sample ("features" [S, I]) with "labels" [S], so Python users and outside checks can
// reuse them (e.g. `mumoe forward MODEL --layer head --input …`). The file is also a
// `features:FILE` data SPEC (core/data/feature_data.h).
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <iostream>
#include <map>

#include "cli_support.h"
#include "io/output_files.h"
#include "data/dataset.h"
#include "io/errors.h"
#include "io/file_checks.h"
#include "io/safetensors.h"
#include "model/classifier_model.h"
#include "model/model_file.h"

#include "model_options.h"

namespace mumoe::cli {
namespace {

struct FeaturesOptions {
  ModelOptions model;
  std::string data = "fashion-mnist:test", output;
  int64_t batch_size = 500, limit = 0;
  bool json = false;

  /// Declares these options on the command `app`.
  void add_to(CLI::App* app) {
    model.add_to(app);
    app->add_option("--data", data, "Data SPEC (default fashion-mnist:test)");
    app->add_option("--output", output, "Safetensors file to write (features, labels)")->required();
    app->add_option("--limit", limit, "Only the first N samples");
    app->add_option("--batch-size", batch_size, "Batch size (default 500)");
    add_json_flag(app, json);
  }
};

int run_features(const FeaturesOptions& o) {
  io::check_outputs({{o.output, "--output"}}, {{o.model.model, "the model"},
                                              {data::feature_file_of(o.data), "the --data file"},
                                              {o.model.backbone, "the TorchScript backbone"},
                                              {o.model.class_names, "--class-names"}});
  const auto file = model::ModelFile::load(o.model.model, o.model.overrides());
  auto classifier = model::ClassifierModel::load(file);
  if (!classifier.has_backbone())
    throw UsageError(o.model.model + " has no backbone: `features` needs an image classifier");
  const auto data = data::load_dataset(o.data);  // folder: and celeba: stream, batch by batch
  // The model's own label names when it has them (the data may only number its classes); a
  // multi-label model's labels name its outputs (attributes), not the data's classes.
  const bool model_names_classes = !file.manifest().label_names.empty() && file.manifest().task != model::kMultiLabel;
  const auto& class_names = model_names_classes ? file.manifest().label_names : data.class_names;
  const int64_t n = o.limit > 0 ? std::min(o.limit, data.size()) : data.size();
  std::vector<torch::Tensor> chunks;
  for (int64_t start = 0; start < n; start += o.batch_size)
    chunks.push_back(classifier.layer_inputs(data, start, std::min(n, start + o.batch_size)));
  const auto features = torch::cat(chunks);
  const auto labels = data.labels.slice(0, 0, n);
  std::vector<io::NamedTensor> tensors = {{"features", features}, {"labels", labels}};
  std::map<std::string, std::string> metadata = {{"mumoe.model", o.model.model},
                                                 {"mumoe.data", o.data},
                                                 {"mumoe.layer", "head"},
                                                 {"mumoe.class_names", nlohmann::json(class_names).dump()}};
  if (data.attributes.defined()) {
    tensors.push_back({"attributes", data.attributes.slice(0, 0, n)});
    metadata["mumoe.attribute_names"] = nlohmann::json(data.attribute_names).dump();
  }
  io::write_safetensors(o.output, tensors, metadata);
  if (o.json)
    std::cout << json_text(nlohmann::json({{"output", o.output}, {"samples", n}, {"feature_dim", features.size(1)}}))
              << "\n";
  else
    std::cout << "wrote " << o.output << ": features [" << n << ", " << features.size(1) << "] and labels\n";
  return kSuccess;
}

}  // namespace

Command add_features_command(CLI::App& parent) {
  return make_command<FeaturesOptions>(parent, "features",
                                       "Write the inputs of a classifier's μMoE head for a data set",
                                       run_features);
}

}  // namespace mumoe::cli
