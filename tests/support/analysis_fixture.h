// Small, real analysis inputs written by the tests: a "mumoe-layers" model file holding one
// randomised μMoE layer or block (a classifier head over C classes) and a feature file whose
// labels are the layer's own predictions for most samples (so accuracies are high but not 1,
// and removing experts visibly changes them).
#pragma once

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <string>

#include "io/safetensors.h"
#include "model/model_file.h"
#include "nn/mumoe_block.h"
#include "reference_math.h"

namespace mumoe::testkit {

struct AnalysisFixture {
  std::string model_path;
  std::string features_path;
  nn::LayerConfig config;
};

inline nn::LayerConfig head_config(nn::Factorization f, std::vector<int64_t> experts, int64_t classes,
                                   int64_t second_dim = 0) {
  nn::LayerConfig c;
  c.factorization = f;
  c.input_dim = 12;
  c.expert_dims = std::move(experts);
  c.cp_rank = 6;
  if (f == nn::Factorization::TR) c.tr_ranks.assign(c.expert_dims.size() + 2, 3);
  if (second_dim > 0) {
    c.output_dim = 10;  // hidden width of the block
    c.second_dim = second_dim;
  } else {
    c.output_dim = classes;
  }
  return c;
}

/// Writes DIR/model.safetensors and DIR/features.safetensors (`samples` rows).
inline AnalysisFixture write_analysis_fixture(const std::string& dir, const nn::LayerConfig& config, int64_t samples,
                                              uint64_t seed, double label_noise = 0.2) {
  AnalysisFixture f;
  f.config = config;
  f.model_path = dir + "/model.safetensors";
  f.features_path = dir + "/features.safetensors";
  nn::MuMoEBlock block(config);
  randomize(block, seed);
  {
    // Larger gate weights make entmax sparse (a few active experts per sample), as trained
    // gates are.
    torch::NoGradGuard no_grad;
    for (auto& p : block->named_parameters())
      if (p.key().rfind("projs.", 0) == 0) p.value().mul_(3.0);
  }
  block->eval();
  model::Manifest m;
  m.layers = {{"head", "head.", config, false, std::nullopt}};
  const int64_t classes = config.final_output_dim();
  for (int64_t c = 0; c < classes; ++c) m.label_names.push_back("class" + std::to_string(c));
  m.provenance = {{"created_by", "analysis test fixture"}};
  model::save_model_file(f.model_path, m, model::layer_tensors(m.layers[0], block));

  torch::manual_seed(seed + 1);
  auto features = torch::randn({samples, config.input_dim});
  torch::Tensor predictions;
  {
    torch::NoGradGuard no_grad;
    predictions = block->forward(features).output.argmax(1);
  }
  const auto noisy = torch::rand({samples}) < label_noise;
  const auto labels = torch::where(noisy, torch::randint(classes, {samples}, torch::kLong), predictions);
  const auto attributes = torch::randint(2, {samples, 2}, torch::kLong);
  nlohmann::json names = nlohmann::json::array();
  for (int64_t c = 0; c < classes; ++c) names.push_back("class" + std::to_string(c));
  io::write_safetensors(f.features_path, {{"features", features}, {"labels", labels}, {"attributes", attributes}},
                        {{"mumoe.class_names", names.dump()}, {"mumoe.attribute_names", R"(["young","male"])"}});
  return f;
}

/// Per-class accuracy of the fixture's layer with rows `experts` of factors.0 zeroed (W_n := 0),
/// run in float64 on the CPU from the model file: an ablation computed without the analysis
/// library, to hold its answers against.
inline std::vector<double> zeroed_rows_accuracy(const AnalysisFixture& fixture, const std::vector<int64_t>& experts) {
  auto block = model::ModelFile::load(fixture.model_path).build_layer("head", torch::kFloat64);
  torch::NoGradGuard no_grad;
  for (auto n : experts) block->first_layer()->factors()[0][n].zero_();
  const auto data = io::SafetensorsFile::open(fixture.features_path);
  const auto labels = data.read("labels");
  const auto predictions = block->forward(data.read("features").to(torch::kFloat64)).output.argmax(1);
  std::vector<double> accuracy;
  for (int64_t c = 0; c < fixture.config.final_output_dim(); ++c)
    accuracy.push_back((predictions.masked_select(labels == c) == c).to(torch::kDouble).mean().item<double>());
  return accuracy;
}

}  // namespace mumoe::testkit
