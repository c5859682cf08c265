#include "model/model_file.h"

#include "io/json_file.h"
#include "model/open_options.h"

#include <torch/torch.h>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>

#include "io/atomic_file.h"
#include "io/errors.h"
#include "io/file_checks.h"
#include "model/backbone_layout.h"

namespace mumoe::model {
namespace {

std::string layer_names(const Manifest& m) {
  std::string out;
  for (const auto& l : m.layers) out += (out.empty() ? "" : ", ") + l.name;
  return out;
}

}  // namespace

ModelFile ModelFile::load(const std::string& path, const LayoutOverrides& overrides) {
  // Remembered choices (open_options.h) apply unless choices are given now; they may name the
  // state dict of a checkpoint that holds several.
  // A sidecar that cannot be read matters only to a file without a manifest of its own.
  const auto sidecar = manifest_sidecar_path(path);
  std::optional<RememberedOptions> remembered;
  std::exception_ptr sidecar_error;
  if (!chooses_layout(overrides)) {
    try {
      remembered = read_remembered_options(path);
    } catch (const FileError&) {
      sidecar_error = std::current_exception();
    }
  }
  ModelFile model(io::open_tensor_archive(
      path, remembered && overrides.checkpoint_key.empty() ? remembered->checkpoint_key : overrides.checkpoint_key));
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& e : model.file_->entries()) {
    const auto stripped = strip_wrapper_prefixes(e.name);
    if (!model.original_name_.emplace(stripped, e.name).second)
      throw FileError(path, "tensors '" + model.original_name_[stripped] + "' and '" + e.name +
                                "' have the same name once 'module.'/'_orig_mod.' are removed");
    shapes[stripped] = e.shape;
  }

  const auto& meta = model.file_->metadata();
  auto it = meta.find(kManifestMetadataKey);
  if (it != meta.end()) {
    model.manifest_ = manifest_from_json(io::parse_bounded_json(it->second, path, "manifest"), path);
  } else if (sidecar_error) {
    std::rethrow_exception(sidecar_error);
  } else if (remembered) {
    // A PyTorch checkpoint this program wrote (it has no metadata of its own), or one whose
    // opening choices were remembered (open_options.h); choices given now infer afresh.
    model.manifest_ = manifest_from_json(remembered->manifest, sidecar);
    model.manifest_beside_ = true;
  } else {
    model.inferred_ = true;
    auto backbone = infer_backbone(shapes, overrides, path);
    if (backbone && backbone->linear_head) {
      // A Mixer: its layers are all in the backbone (and a plain-MLP Mixer has none).
      model.manifest_ = *inferred_classifier_manifest(*backbone, {});
    } else {
      std::vector<std::string> keys;
      for (const auto& entry : shapes) keys.push_back(entry.first);
      // nanoGPT's GPT-2 with plain MLPs only is still a GPT: it opens, evaluates and generates
      // with nothing to analyse.
      const bool any_layer = std::any_of(keys.begin(), keys.end(), [](const std::string& key) {
        return key == "projs.0" || (key.size() > 8 && key.compare(key.size() - 8, 8, ".projs.0") == 0);
      });
      if (any_layer || !is_nanogpt_layout(keys)) model.manifest_.layers = infer_layers(shapes, overrides, path);
      model.manifest_.provenance = {{"source", "PyTorch state_dict; configuration inferred from key names and shapes"}};
      if (backbone)
        if (auto classifier = inferred_classifier_manifest(*backbone, model.manifest_.layers))
          model.manifest_ = std::move(*classifier);
    }
  }
  if (!overrides.torchscript_backbone.empty())
    model.manifest_ = torchscript_classifier_manifest(model.manifest_, overrides, path);
  if (!overrides.label_names.empty()) model.manifest_.label_names = overrides.label_names;
  for (const auto& layer : model.manifest_.layers) model.check_layer_shapes(layer);
  return model;
}

namespace {

/// The tensors of a router layer (nn::MoELayer's parameters) and their shapes.
std::map<std::string, std::vector<int64_t>> router_shapes(const nn::MoELayerConfig& c) {
  const int64_t first_out = c.hidden_dim > 0 ? c.hidden_dim : c.output_dim;
  std::map<std::string, std::vector<int64_t>> shapes = {
      {"router", {c.input_dim, c.experts * (c.router == nn::RouterKind::SoftMoE ? c.slots_per_expert : 1)}},
      {"experts_w1", {c.experts, c.input_dim, first_out}},
      {"experts_b1", {c.experts, first_out}}};
  if (c.hidden_dim > 0) {
    shapes["experts_w2"] = {c.experts, c.hidden_dim, c.output_dim};
    shapes["experts_b2"] = {c.experts, c.output_dim};
  }
  return shapes;
}

}  // namespace

void ModelFile::check_layer_shapes(const ModelLayer& layer) const {
  const auto shapes = layer.is_router() ? router_shapes(*layer.router) : expected_shapes(layer.config);
  for (const auto& [key, shape] : shapes) {
    const auto name = file_key(layer, key);
    auto it = original_name_.find(name);
    const bool optional = key.find("num_batches_tracked") != std::string::npos;
    if (it == original_name_.end()) {
      if (optional) continue;
      throw FileError(path(), "layer '" + layer.name + "': tensor '" + name + "' is missing");
    }
    const auto& entry = file_->entry(it->second);
    if (entry.shape != shape && !(optional && entry.numel() == 1))
      throw FileError(path(), "layer '" + layer.name + "': tensor '" + name + "' has shape " +
                                  c10::str(c10::IntArrayRef(entry.shape)) + ", expected " +
                                  c10::str(c10::IntArrayRef(shape)));
  }
}

const ModelLayer& ModelFile::layer(const std::string& name) const {
  for (const auto& l : manifest_.layers)
    if (l.name == name) return l;
  if (manifest_.layers.empty())
    throw UsageError(path() + " has no μMoE layer (its MLPs are all plain), so none named '" + name +
                     "': it evaluates and generates, but has no experts to analyse");
  throw UsageError(path() + " has no μMoE layer named '" + name + "' (layers: " +
                   layer_names(manifest_) + ")");
}

const ModelLayer& ModelFile::single_layer() const {
  if (manifest_.layers.empty())
    throw UsageError(path() + " has no μMoE layer (its MLPs are all plain): it evaluates and generates, but has no "
                              "experts to analyse");
  if (manifest_.layers.size() != 1)
    throw UsageError(path() + " has " + std::to_string(manifest_.layers.size()) +
                     " μMoE layers; choose one with --layer (" + layer_names(manifest_) + ")");
  return manifest_.layers.front();
}

std::string manifest_sidecar_path(const std::string& model_path) { return model_path + ".mumoe.json"; }

void write_manifest_sidecar(const std::string& model_path, const Manifest& manifest,
                            const std::string& checkpoint_key) {
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(model_path, ec);
  if (ec) throw WriteError(model_path, "cannot size the checkpoint for its manifest: " + ec.message());
  nlohmann::json json = {{"manifest", to_json(manifest)}, {"model_file_bytes", bytes}};
  if (!checkpoint_key.empty()) json["checkpoint_key"] = checkpoint_key;
  const auto text = json.dump(1) + "\n";
  io::AtomicFileWriter out(manifest_sidecar_path(model_path));
  out.write(text.data(), text.size());
  out.commit();
}

std::string ModelFile::original_name(const std::string& name) const {
  auto it = original_name_.find(name);
  if (it == original_name_.end()) throw FileError(path(), "no tensor named '" + name + "'");
  return it->second;
}

std::vector<std::string> ModelFile::tensor_names() const {
  std::vector<std::string> names;
  for (const auto& [stripped, original] : original_name_) names.push_back(stripped);
  return names;
}

torch::Tensor ModelFile::read_tensor(const std::string& name) const {
  auto it = original_name_.find(name);
  if (it == original_name_.end()) throw FileError(path(), "no tensor named '" + name + "'");
  return file_->read(it->second);
}

void ModelFile::load_into(torch::nn::Module& module,
                          const std::function<std::string(const std::string&)>& file_key_of) const {
  torch::NoGradGuard no_grad;
  auto assign = [&](const std::string& key, torch::Tensor& target, bool optional) {
    const auto stored = file_key_of(key);
    if (!original_name_.count(stored)) {
      if (optional) return;
      throw FileError(path(), "tensor '" + stored + "' is missing");
    }
    auto value = read_tensor(stored);
    if (value.numel() != target.numel() || (target.dim() > 0 && value.sizes() != target.sizes()))
      throw FileError(path(), "tensor '" + stored + "' has shape " + c10::str(value.sizes()) + ", expected " +
                                  c10::str(target.sizes()));
    if (target.is_floating_point()) {
      if (!value.is_floating_point())
        throw FileError(path(), "tensor '" + stored + "' has dtype " + file_->entry(original_name_.at(stored)).dtype +
                                    "; parameters must be F32, F64, F16 or BF16");
      if (!torch::isfinite(value).all().item<bool>())
        throw FileError(path(), "tensor '" + stored + "' contains NaN or infinite values");
      // A variance below 0 makes BatchNorm divide by the square root of a negative number: every
      // output NaN (issue 45). Refused here, by name, instead of computed.
      if (stored.size() >= 11 && stored.compare(stored.size() - 11, 11, "running_var") == 0 &&
          (value < 0).any().item<bool>())
        throw FileError(path(), "tensor '" + stored + "' holds a negative variance (" +
                                    std::to_string(value.min().item<double>()) + "): not a BatchNorm's running statistics");
    }
    target.copy_(value.to(target.dtype()).reshape(target.sizes()));
  };
  for (auto& p : module.named_parameters()) assign(p.key(), p.value(), false);
  for (auto& b : module.named_buffers())
    assign(b.key(), b.value(), b.key().find("num_batches_tracked") != std::string::npos);
}

nn::MuMoEBlock ModelFile::build_layer(const std::string& name, torch::Dtype dtype) const {
  const auto& spec = layer(name);
  if (spec.is_router())
    throw UsageError(path() + ": layer '" + name + "' is a " + spec.family() +
                     " layer, and this works on μMoE layers only");
  nn::MuMoEBlock block(spec.config);
  load_into(*block, [&spec](const std::string& key) { return file_key(spec, key); });
  block->to(dtype);
  block->eval();
  return block;
}

nn::MoELayer ModelFile::build_router_layer(const std::string& name, torch::Dtype dtype) const {
  const auto& spec = layer(name);
  if (!spec.is_router())
    throw UsageError(path() + ": layer '" + name + "' is a μMoE layer, not a sparse or soft MoE layer");
  nn::MoELayer moe(*spec.router);
  load_into(*moe, [&spec](const std::string& key) { return spec.prefix + key; });
  moe->to(dtype);
  moe->eval();
  return moe;
}

std::vector<io::NamedTensor> layer_tensors(const ModelLayer& layer, const nn::MoELayer& moe) {
  std::vector<io::NamedTensor> out;
  for (const auto& p : moe->named_parameters()) out.push_back({layer.prefix + p.key(), p.value()});
  return out;
}

std::vector<io::NamedTensor> layer_tensors(const ModelLayer& layer, const nn::MuMoEBlock& block) {
  std::vector<io::NamedTensor> out;
  for (const auto& p : block->named_parameters()) out.push_back({file_key(layer, p.key()), p.value()});
  for (const auto& b : block->named_buffers()) out.push_back({file_key(layer, b.key()), b.value()});
  return out;
}

void save_model_file(const std::string& path, const Manifest& manifest,
                     const std::vector<io::NamedTensor>& tensors, const io::WriteProgress& progress) {
  io::write_safetensors(path, tensors, {{kManifestMetadataKey, to_json(manifest).dump()}}, progress);
}

}  // namespace mumoe::model
