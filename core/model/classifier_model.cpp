#include "model/classifier_model.h"

#include <torch/torch.h>

#include "io/errors.h"
#include "model/classifier_file.h"
#include "model/gpt_file.h"

namespace mumoe::model {
namespace {

// The backbone's inputs for samples `indices` on `device`: images held in memory are prepared as
// one batch there; streamed images are decoded and prepared one by one on the CPU's threads (they
// differ in size until prepared), so only this batch is ever in memory.
torch::Tensor prepared_images(const nn::ImageClassifier& classifier, const data::Dataset& data,
                              const torch::Tensor& indices, const torch::Device& device) {
  if (!data.streams_images())
    return classifier->prepare_images(data::to_float_images(data.images.index_select(0, indices.cpu())).to(device));
  const auto& stream = *data.image_stream;
  const auto& b = classifier->backbone_config();
  return data::decode_images(stream, indices.cpu(), [&](const torch::Tensor& image, int64_t sample) {
           if (!b.preprocess.enabled && (image.size(1) != b.image_size || image.size(2) != b.image_size))
             throw FileError(stream.source(sample),
                             "is " + std::to_string(image.size(2)) + "×" + std::to_string(image.size(1)) +
                                 " but the model's " + b.describe() + " takes exactly " +
                                 std::to_string(b.image_size) + "×" + std::to_string(b.image_size) +
                                 " images (it has no resizing preprocessing)");
           return classifier->prepare_images(data::to_float_images(image).unsqueeze(0)).squeeze(0);
         })
      .to(device);
}

}  // namespace

ClassifierModel ClassifierModel::load(const ModelFile& file, const std::string& layer) {
  ClassifierModel m;
  m.label_names_ = file.manifest().label_names;
  m.multilabel_ = file.manifest().task == kMultiLabel;
  if (file.manifest().architecture == kGptArchitecture)
    throw UsageError(file.path() + " is a μMoE GPT (a language model), not a classifier: give this command a "
                     "classifier, or analyse the GPT with a text SPEC (e.g. `mumoe gallery GPT --data fortunes`)");
  if (file.manifest().architecture == kImageClassifierArchitecture) {
    if (!layer.empty() && layer != "head") file.layer(layer);  // names the file's layers when it has no such one
    if (!layer.empty() && layer != "head")
      throw UsageError(file.path() + " is an image classifier; " +
                       (backbone_layer_step(layer) ? "its backbone's μMoE layer '" + layer +
                                                   "' is analysed by `mumoe gallery` and `mumoe ablate` (--layer " +
                                                   layer + "); this command works on its 'head'"
                                             : "its μMoE layer here is 'head', not '" + layer + "'"));
    m.classifier_ = load_image_classifier(file);
    m.layer_ = m.classifier_->head();
    m.router_ = m.classifier_->router_head();
    m.layer_name_ = "head";
  } else {
    const auto& l = layer.empty() ? file.single_layer() : file.layer(layer);
    if (l.is_router())
      m.router_ = file.build_router_layer(l.name);
    else
      m.layer_ = file.build_layer(l.name);
    m.layer_name_ = l.name;
  }
  m.module().eval();
  return m;
}

nn::MuMoEBlock ClassifierModel::layer() const {
  if (has_linear_head()) throw UsageError(linear_head_note());
  if (is_router())
    throw UsageError("layer '" + layer_name_ + "' is a " + layer_family() +
                     " layer (a sparse or soft MoE), and this works on μMoE layers only");
  return layer_;
}

bool ClassifierModel::has_linear_head() const { return has_backbone() && classifier_->has_linear_head(); }

std::string ClassifierModel::linear_head_note() const {
  std::string names;
  for (const auto& layer : backbone_layers(classifier_->backbone_config(), ""))
    names += (names.empty() ? "" : ", ") + layer.name;
  return "the model's " + classifier_->backbone_config().describe() +
         " classifies with a plain Linear head, which has no experts; " +
         (names.empty() ? std::string("its backbone has no μMoE layers either")
                        : "its μMoE layers are in the backbone (" + names + "): analyse one with --layer NAME");
}

ModelLayer ClassifierModel::manifest_layer() const {
  if (has_linear_head()) throw UsageError(linear_head_note());
  ModelLayer layer;
  layer.name = layer_name_;
  layer.prefix = layer_name_ + ".";
  if (is_router())
    layer.router = router_->config();
  else
    layer.config = layer_->config();
  return layer;
}

nlohmann::json ClassifierModel::layer_config_json() const {
  return model::layer_config_json(manifest_layer());
}

std::vector<int64_t> ClassifierModel::expert_dims() const {
  if (has_linear_head()) return {};
  return is_router() ? std::vector<int64_t>{router_->config().experts} : layer_->config().expert_dims;
}

int64_t ClassifierModel::layer_input_dim() const {
  if (has_linear_head()) return classifier_->backbone_config().feature_dim;
  return is_router() ? router_->config().input_dim : layer_->config().input_dim;
}

int64_t ClassifierModel::aligned_batch(int64_t rows) const {
  if (!is_router() || router_->config().group_size <= 0) return rows;
  const int64_t group = router_->config().group_size;
  return std::max<int64_t>(1, (rows + group - 1) / group) * group;
}

int64_t ClassifierModel::class_count() const {
  if (has_backbone()) return classifier_->class_count();
  return is_router() ? router_->config().output_dim : layer_->config().final_output_dim();
}

torch::Tensor ClassifierModel::backbone_inputs(const data::Dataset& data, const torch::Tensor& indices,
                                               const torch::Device& device) const {
  if (!has_backbone()) throw UsageError("the μMoE layer '" + layer_name_ + "' has no backbone: its inputs are features");
  return prepared_images(classifier_, data, indices, device);
}

ClassifierModel ClassifierModel::from_image_classifier(nn::ImageClassifier classifier,
                                                       std::vector<std::string> labels, bool multilabel) {
  ClassifierModel m;
  m.multilabel_ = multilabel;
  m.classifier_ = std::move(classifier);
  m.layer_ = m.classifier_->head();
  m.router_ = m.classifier_->router_head();
  m.layer_name_ = "head";
  m.label_names_ = std::move(labels);
  return m;
}

ClassifierModel ClassifierModel::bare_layer(std::string name, std::vector<std::string> labels, bool multilabel) {
  ClassifierModel m;
  m.multilabel_ = multilabel;
  m.layer_name_ = std::move(name);
  m.label_names_ = std::move(labels);
  return m;
}

ClassifierModel ClassifierModel::from_router_layer(nn::MoELayer layer, std::string name,
                                                   std::vector<std::string> labels, bool multilabel) {
  auto m = bare_layer(std::move(name), std::move(labels), multilabel);
  m.router_ = std::move(layer);
  return m;
}

ClassifierModel ClassifierModel::from_layer(nn::MuMoEBlock layer, std::string name, std::vector<std::string> labels,
                                            bool multilabel) {
  auto m = bare_layer(std::move(name), std::move(labels), multilabel);
  m.layer_ = std::move(layer);
  return m;
}

torch::nn::Module& ClassifierModel::module() {
  if (has_backbone()) return *classifier_;
  if (is_router()) return *router_;
  return *layer_;
}

nn::BlockOutput ClassifierModel::forward(const data::Dataset& data, const torch::Tensor& indices,
                                         const torch::Device& device, const nn::ExpertAblation& ablation) {
  const auto rows = has_backbone()
                        ? classifier_->backbone_features(prepared_images(classifier_, data, indices, device))
                        : data.features.index_select(0, indices).to(device);
  auto out = forward_layer(rows, ablation);
  // Router MLPs in the backbone: their load-balancing losses (a router head's own is in out).
  if (has_backbone()) {
    const auto backbone_loss = classifier_->backbone()->auxiliary_loss();
    if (backbone_loss.defined()) out.aux_loss = out.aux_loss.defined() ? out.aux_loss + backbone_loss : backbone_loss;
  }
  return out;
}

nn::BlockOutput ClassifierModel::forward_layer(const torch::Tensor& inputs, const nn::ExpertAblation& ablation) {
  if (has_linear_head()) return classifier_->classify(inputs, ablation);
  return is_router() ? router_->forward_block(inputs, ablation) : layer_->forward(inputs, ablation);
}

void ClassifierModel::load_weights(const ModelFile& file) {
  if (has_backbone()) {
    file.load_into(*classifier_, [&file](const std::string& key) { return classifier_file_key(file, key); });
  } else {
    const auto& layer = file.layer(layer_name_);
    if (layer.is_router() != is_router())
      throw FileError(file.path(), "layer '" + layer_name_ + "' is a " + layer.family() + " layer, not a " +
                                       layer_family() + " layer like the model's");
    if (is_router())
      file.load_into(*router_, [&](const std::string& key) { return layer.prefix + key; });
    else
      file.load_into(*layer_, [&](const std::string& key) { return file_key(layer, key); });
  }
}

void ClassifierModel::save(const std::string& path, const nlohmann::json& provenance) const {
  if (has_backbone()) {
    auto m = image_classifier_manifest(classifier_, label_names_, provenance);
    m.task = multilabel_ ? kMultiLabel : kMultiClass;
    save_image_classifier(path, classifier_, m);
    return;
  }
  Manifest m;
  const auto layer = manifest_layer();
  m.layers = {layer};
  m.label_names = label_names_;
  m.task = multilabel_ ? kMultiLabel : kMultiClass;
  m.provenance = provenance;
  save_model_file(path, m, is_router() ? layer_tensors(layer, router_) : layer_tensors(layer, layer_));
}

void ClassifierModel::check_compatible(const data::Dataset& data) const {
  if (has_backbone()) {
    if (!data.has_images())
      throw UsageError(data.identity + " holds features, but this model is an image classifier: use an image SPEC");
    const auto b = classifier_->backbone_config();
    const auto channels = data.image_channels();
    if (b.preprocess.enabled) {
      // Any size: the eval transform resizes and crops; grey images become RGB.
      if (channels != b.in_channels && channels != 1)
        throw UsageError(data.identity + " has images with " + std::to_string(channels) +
                         " channels but the model's " + b.describe() + " takes " + std::to_string(b.in_channels));
    } else {
      // A streamed set is checked on its first image here; every other image when it is decoded.
      // Keep the image: sizes() refers into the tensor, which a temporary would take with it
      // (a use after free that ASan found).
      const auto first = data.image(0);
      const auto shape = first.sizes();
      if (shape[0] != b.in_channels || shape[1] != b.image_size || shape[2] != b.image_size)
        throw UsageError(data.identity + " has images of shape " + c10::str(shape) + " but the model expects [" +
                         std::to_string(b.in_channels) + ", " + std::to_string(b.image_size) + ", " +
                         std::to_string(b.image_size) + "]");
    }
  } else {
    if (data.has_images())
      throw UsageError(data.identity + " holds images, but layer '" + layer_name_ +
                       "' is a bare " + (is_router() ? layer_family() : std::string("μMoE")) +
                       " layer: give it a features:FILE SPEC");
    if (data.features.size(1) != layer_input_dim())
      throw UsageError(data.identity + " has " + std::to_string(data.features.size(1)) +
                       "-dimensional features but layer '" + layer_name_ + "' expects " +
                       std::to_string(layer_input_dim()));
  }
  if (multilabel_) {
    if (!data.multilabel() || data.target_names != label_names_)
      throw UsageError("this multi-label model predicts " + std::to_string(label_names_.size()) +
                       " attributes; " + data.identity + " must be prepared with them as targets");
    if (static_cast<int64_t>(label_names_.size()) != class_count())
      throw UsageError("layer '" + layer_name_ + "' has " + std::to_string(class_count()) + " outputs but the model has " +
                       std::to_string(label_names_.size()) + " target attributes");
    return;
  }
  const auto classes = static_cast<int64_t>(data.class_names.size());
  // The data's labels reach class index classes − 1: a label the model has no output for is a
  // fault of the data (or of the pairing), reported as bad input naming the data.
  if (classes > class_count())
    throw FileError(data.identity, "has " + std::to_string(classes) + " classes (labels up to " +
                                       std::to_string(classes - 1) + ") but layer '" + layer_name_ + "' has " +
                                       std::to_string(class_count()) + " outputs");
  if (!label_names_.empty() && static_cast<int64_t>(label_names_.size()) != classes)
    throw UsageError("the model has " + std::to_string(label_names_.size()) + " labels but " + data.identity +
                     " has " + std::to_string(classes) + " classes");
}

data::Dataset ClassifierModel::prepare(data::Dataset data) const {
  if (!multilabel_ || (data.multilabel() && data.target_names == label_names_)) return data;
  return data::with_targets(std::move(data), label_names_);
}

torch::Tensor ClassifierModel::layer_inputs(const data::Dataset& data, int64_t begin, int64_t end) {
  torch::NoGradGuard no_grad;
  if (!has_backbone()) return data.features.slice(0, begin, end).to(torch::kFloat32);
  const auto prepared = prepared_images(classifier_, data, torch::arange(begin, end), device_);
  return classifier_->backbone_features(prepared).to(torch::kCPU, torch::kFloat32);
}

void ClassifierModel::backbone_to(const torch::Device& device) {
  device_ = device;
  if (has_backbone()) {
    // Only the backbone: the head's dtype/device is chosen by whoever evaluates it.
    for (auto& child : classifier_->named_children())
      if (child.key() != "head") child.value()->to(device);
  }
}

}  // namespace mumoe::model
