// A model that turns samples into class scores through one μMoE layer — what the analysis
// engine, evaluation and the rewrite work on:
//   * an image classifier (CNN backbone → μMoE head) on image data, or
//   * a bare μMoE layer or block ("mumoe-layers" model file) on precomputed features, whose
//     final output width is the number of classes (e.g. a head trained on CLIP features).
// The μMoE layer is split off so that analysis can cache its inputs and re-evaluate only it.
// The layer — a bare layer, or an image classifier's head — may instead be a sparse or soft MoE
// layer of the router study (nn/moe_layer.h, is_router()): forward, training, evaluation,
// analysis and the rewrite work on it (forward_layer, router_layer()); what needs the μMoE
// layer itself (its factors) calls layer(), which throws a UsageError naming the router.
#pragma once

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include <string>
#include <vector>

#include "data/dataset.h"
#include "model/model_file.h"
#include "nn/image_classifier.h"
#include "nn/moe_layer.h"
#include "nn/mumoe_block.h"

namespace mumoe::model {

class ClassifierModel {
 public:
  /// Builds the model in eval mode on the CPU. `layer` picks the μMoE layer of a
  /// "mumoe-layers" file ("" = its only layer); image classifiers always use "head".
  /// Throws FileError/UsageError naming the file and the problem.
  static ClassifierModel load(const ModelFile& file, const std::string& layer = "");
  /// A new model around an image classifier, or around a bare layer called `name`.
  /// `multilabel`: one binary output per label, each a data attribute of that name.
  static ClassifierModel from_image_classifier(nn::ImageClassifier classifier, std::vector<std::string> labels,
                                               bool multilabel = false);
  static ClassifierModel from_layer(nn::MuMoEBlock layer, std::string name, std::vector<std::string> labels,
                                    bool multilabel = false);
  static ClassifierModel from_router_layer(nn::MoELayer layer, std::string name, std::vector<std::string> labels,
                                           bool multilabel = false);

  /// Every trainable parameter and buffer (backbone and layer).
  torch::nn::Module& module();
  /// Class scores and coefficients for data samples `indices` (long [B]) on `device` (the
  /// model must be there). Gradients flow unless the caller disables them.
  nn::BlockOutput forward(const data::Dataset& data, const torch::Tensor& indices, const torch::Device& device,
                          const nn::ExpertAblation& ablation = {});
  /// Copies a model file's weights into this model (a checkpoint of the same architecture).
  void load_weights(const ModelFile& file);
  /// Writes the model (its manifest records `provenance`), atomically.
  void save(const std::string& path, const nlohmann::json& provenance) const;

  /// Throws UsageError when `data` cannot be fed to this model (images vs features, image shape,
  /// feature width, class count vs the model's labels; for a multi-label model, targets other
  /// than its labels) and FileError naming the data when it has labels beyond the layer's outputs.
  void check_compatible(const data::Dataset& data) const;
  /// `data` made ready for this model: a multi-label model's labels become the data's targets
  /// (data::with_targets; throws UsageError when an attribute is missing); unchanged otherwise.
  data::Dataset prepare(data::Dataset data) const;

  /// The analysed layer (μMoE or router) on its inputs [B, I] (what layer_inputs gives): class
  /// scores and coefficients (a router layer: one mode, its combine weights per expert). A router
  /// layer routes `inputs` in groups of its group size from the first row, so callers pass whole
  /// groups (aligned_batch) to get the answers of every other path.
  nn::BlockOutput forward_layer(const torch::Tensor& inputs, const nn::ExpertAblation& ablation = {});

  /// The μMoE layer's inputs for samples [begin, end): backbone features for images, the
  /// feature rows for feature files. float32 [n, I] on the CPU. No gradients.
  torch::Tensor layer_inputs(const data::Dataset& data, int64_t begin, int64_t end);

  /// The backbone's inputs for samples `indices` (long [B]) on `device`: decoded (streamed data
  /// one image at a time) and preprocessed [B, C, S, S]. Throws UsageError for a bare layer.
  torch::Tensor backbone_inputs(const data::Dataset& data, const torch::Tensor& indices,
                                const torch::Device& device) const;

  /// The analysed μMoE layer (shared with the model: moving or casting it changes the model).
  /// Throws UsageError naming the router for a router layer.
  nn::MuMoEBlock layer() const;
  /// True when the image classifier's head is a plain Linear layer (an MLP-Mixer's): then there is
  /// no analysed layer here — layer(), manifest_layer() throw UsageError naming the backbone's μMoE
  /// layers, which the block analysis (analysis/vit_block_analysis.h) takes — and forward_layer
  /// is the Linear head on features.
  bool has_linear_head() const;
  /// True when the analysed layer is a sparse or soft MoE layer (router_layer()), not μMoE.
  bool is_router() const { return !router_.is_empty(); }
  /// The router layer (empty holder for a μMoE layer).
  nn::MoELayer router_layer() const { return router_; }
  /// The analysed layer as a manifest entry of a bare-layer file (name, prefix "<name>.", its
  /// μMoE configuration or router configuration): what save() writes and reports describe.
  ModelLayer manifest_layer() const;
  /// "μMoE CP", "Soft MoE", … (ModelLayer::family).
  std::string layer_family() const { return has_linear_head() ? "Linear" : manifest_layer().family(); }
  /// The layer's configuration as the manifest writes it.
  nlohmann::json layer_config_json() const;
  /// Experts per expert mode: the μMoE layer's expert_dims, or {n} for a router layer.
  std::vector<int64_t> expert_dims() const;
  int64_t layer_input_dim() const;
  /// `rows` rounded up to whole routing groups: a router layer routes fixed groups of samples
  /// (MoELayerConfig::group_size), so every batching of the same data that evaluates it in
  /// multiples of the group gives the same answers. `rows` unchanged for μMoE layers.
  int64_t aligned_batch(int64_t rows) const;
  const std::string& layer_name() const { return layer_name_; }
  int64_t class_count() const;
  const std::vector<std::string>& label_names() const { return label_names_; }
  /// True when every output is an independent binary target (sigmoid/BCE), not a class score.
  bool multilabel() const { return multilabel_; }
  bool has_backbone() const { return !classifier_.is_empty(); }
  /// The image classifier (empty holder for a bare layer).
  nn::ImageClassifier image_classifier() const { return classifier_; }

  /// Moves the backbone to `device` for layer_inputs (analysis moves copies of the layer itself).
  void backbone_to(const torch::Device& device);

 private:
  /// A model of one bare layer, its module still to be set (from_layer, from_router_layer).
  static ClassifierModel bare_layer(std::string name, std::vector<std::string> labels, bool multilabel);

  nn::ImageClassifier classifier_{nullptr};
  nn::MuMoEBlock layer_{nullptr};
  nn::MoELayer router_{nullptr};
  std::string layer_name_;
  std::vector<std::string> label_names_;
  bool multilabel_ = false;
  torch::Device device_ = torch::kCPU;
  /// Why there is no analysed layer in a classifier with a Linear head, and what to do.
  std::string linear_head_note() const;
};

}  // namespace mumoe::model
