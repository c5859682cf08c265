#include "editing/model_export.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>

#include "editing/edit_fold.h"
#include "editing/logit_rewrite.h"
#include "io/pytorch_checkpoint.h"
#include "io/errors.h"
#include "io/output_files.h"
#include "model/classifier_file.h"
#include "model/classifier_model.h"
#include "model/gpt_file.h"
#include "model/manifest.h"
#include "model/model_summary.h"
#include "nn/expert_slices.h"

namespace mumoe::editing {
namespace {

namespace fs = std::filesystem;

// `edited` (a new classifier of `old`'s backbone) given `old`'s backbone tensors and `folded`'s
// as its head ("head.*").
void copy_into(const nn::ImageClassifier& old, torch::nn::Module& folded, nn::ImageClassifier& edited) {
  auto old_params = old->named_parameters();
  auto head_params = folded.named_parameters();
  for (auto& p : edited->named_parameters()) {
    const auto& key = p.key();
    p.value().copy_(key.rfind("head.", 0) == 0 ? head_params[key.substr(5)] : old_params[key]);
  }
  auto old_buffers = old->named_buffers();
  auto head_buffers = folded.named_buffers();
  for (auto& b : edited->named_buffers()) {
    const auto& key = b.key();
    b.value().copy_(key.rfind("head.", 0) == 0 ? head_buffers[key.substr(5)] : old_buffers[key]);
  }
  edited->eval();
}

// The source model with its analysed layer's edits folded in (edit_fold.h): a μMoE layer or a
// router layer, bare or an image classifier's head.
model::ClassifierModel with_folded_edits(const model::ClassifierModel& source, const std::vector<LogitEdit>& edits) {
  torch::NoGradGuard no_grad;
  // An image classifier of the source's backbone around the folded head (either layer kind).
  auto around_backbone = [&](auto& folded) {
    nn::ImageClassifier edited(source.image_classifier()->backbone_config(), folded->config());
    copy_into(source.image_classifier(), *folded, edited);
    return model::ClassifierModel::from_image_classifier(edited, source.label_names(), source.multilabel());
  };
  if (source.is_router()) {
    auto folded = fold_edits(source.router_layer(), edits);
    return source.has_backbone() ? around_backbone(folded)
                                 : model::ClassifierModel::from_router_layer(folded, source.layer_name(),
                                                                             source.label_names(), source.multilabel());
  }
  auto folded = fold_edits(source.layer(), edits);
  return source.has_backbone()
             ? around_backbone(folded)
             : model::ClassifierModel::from_layer(folded, source.layer_name(), source.label_names(), source.multilabel());
}

// Plain state_dict tensors as PyTorch would name them: the whole classifier ("backbone.*",
// "head.*"), or a bare layer's own keys ("projs.0", "MuMoE.factors.0", …).
std::vector<io::NamedTensor> plain_state_dict(model::ClassifierModel& m) {
  std::vector<io::NamedTensor> tensors;
  for (const auto& p : m.module().named_parameters()) tensors.push_back({p.key(), p.value()});
  for (const auto& b : m.module().named_buffers()) tensors.push_back({b.key(), b.value()});
  return tensors;
}

bool is_checkpoint_name(const std::string& path) {
  const auto ext = fs::path(path).extension().string();
  return ext == ".pth" || ext == ".pt";
}

// Every tensor of `source` under its own name (wrapper prefixes included): the edited model's
// value where the model has that tensor, the file's own otherwise (other layers, extra entries).
std::vector<io::NamedTensor> source_layout_tensors(const model::ModelFile& source, model::ClassifierModel& edited) {
  std::map<std::string, torch::Tensor> values;  // stripped file key → edited value
  auto add = [&](const std::string& module_key, const torch::Tensor& value) {
    if (edited.has_backbone()) {
      values[model::classifier_file_key(source, module_key)] = value;
    } else {
      values[model::file_key(source.layer(edited.layer_name()), module_key)] = value;
    }
  };
  for (const auto& p : edited.module().named_parameters()) add(p.key(), p.value());
  for (const auto& b : edited.module().named_buffers()) add(b.key(), b.value());
  std::vector<io::NamedTensor> tensors;
  for (const auto& name : source.tensor_names()) {
    auto it = values.find(name);
    tensors.push_back({source.original_name(name), it != values.end() ? it->second : source.read_tensor(name)});
  }
  return tensors;
}

// The source's manifest describing the edited model.
model::Manifest edited_manifest(const model::ModelFile& source, const model::ClassifierModel& edited,
                                const nlohmann::json& provenance) {
  auto manifest = source.manifest();
  for (auto& layer : manifest.layers)
    if (layer.name == edited.layer_name()) layer.config = edited.layer()->config();
  manifest.provenance = provenance;
  return manifest;
}

void write_source_layout(const std::string& staging, const std::string& output, const model::ModelFile& source,
                         model::ClassifierModel& edited, const nlohmann::json& provenance,
                         const io::WriteProgress& progress) {
  const auto tensors = source_layout_tensors(source, edited);
  const auto manifest = edited_manifest(source, edited, provenance);
  if (is_checkpoint_name(output)) {
    // Nested where the source had it ({"model": state_dict} stays so; its other entries, such as
    // an optimizer state, are not carried over).
    io::write_pytorch_checkpoint(staging, tensors, source.state_dict_key());
    model::write_manifest_sidecar(staging, manifest);
  } else {
    io::write_safetensors(staging, tensors,
                          {{"format", "pt"}, {model::kManifestMetadataKey, model::to_json(manifest).dump()}}, progress);
  }
}

// What the exported model must compute on samples [begin, end) of the data: the live-edited model's
// outputs (a classifier's logits, a bare layer's outputs).
using LiveOutputs = std::function<torch::Tensor(const data::Dataset&, int64_t begin, int64_t end)>;

// Max |reloaded − live| over the first samples of `data`.
double verify(const std::string& written, const std::string& layer, const LiveOutputs& live, const data::Dataset& data,
              int64_t samples) {
  torch::NoGradGuard no_grad;
  const auto file = model::ModelFile::load(written);
  auto reloaded = model::ClassifierModel::load(file, file.inferred() ? "" : layer);
  const int64_t n = std::min(samples, data.size());
  // In batches: verifying all 60,000 training images at once held them decoded together (12 GB,
  // issue 45); a batch's memory is what any forward of the model needs.
  constexpr int64_t kBatch = 256;
  double diff = 0;
  for (int64_t begin = 0; begin < n; begin += kBatch) {
    const int64_t end = std::min(n, begin + kBatch);
    const auto expected = live(data, begin, end);
    const auto actual = reloaded.has_backbone()
                            ? reloaded.forward(data, torch::arange(begin, end), torch::kCPU).output
                            : reloaded.forward_layer(reloaded.layer_inputs(data, begin, end)).output;
    if (actual.sizes() != expected.sizes())
      throw Error("export verification: the reloaded model gives outputs of shape " + c10::str(actual.sizes()) +
                  " instead of " + c10::str(expected.sizes()));
    const auto batch = (actual.to(torch::kFloat64) - expected.to(torch::kFloat64)).abs().max().item<double>();
    if (!std::isfinite(batch))
      throw Error("export verification: the reloaded model gives NaN or infinite outputs on samples " +
                  std::to_string(begin) + "–" + std::to_string(end - 1));
    diff = std::max(diff, batch);
  }
  return diff;
}

// The request's checks before anything is computed: an output, samples to verify on, a
// destination that may be replaced.
void check_request(const model::ModelFile& source, const ExportRequest& request) {
  if (request.output.empty()) throw UsageError("export: no output file given");
  if (request.verify_samples < 1) throw UsageError("export: verify at least one sample (verify_samples is " +
                                                   std::to_string(request.verify_samples) + ")");
  // Only a regular file is ever replaced (a FIFO or device at the path is refused, not renamed
  // over); an earlier export killed during its verification left its staging file: swept here.
  io::require_replaceable(request.output);
  io::require_replaceable(model::manifest_sidecar_path(request.output));
  io::sweep_stale_temporaries(request.output);
  std::error_code ec;
  const bool exists = fs::exists(request.output, ec);
  if (exists && fs::equivalent(request.output, source.path(), ec) && !request.overwrite)
    throw UsageError(request.output + " is the source model; pass --overwrite to replace it with the edited model");
  if (exists && !request.overwrite) throw UsageError(request.output + " exists; pass --overwrite to replace it");
}

// Auto: a user's own layout stays theirs, also when it is edited again after an export.
ExportLayout chosen_layout(const model::ModelFile& source, const ExportRequest& request) {
  const bool users_layout = source.inferred() || source.manifest().provenance.value("layout", "") == "source";
  return request.layout != ExportLayout::Auto ? request.layout
         : users_layout                       ? ExportLayout::Source
                                              : ExportLayout::Mumoe;
}

// Writes `edited` in report.layout under a unique name beside the destination (io::TemporaryFile:
// never a file of the user's, removed on failure, cancel and fatal signals), verifies the written
// file against `live` and only then renames it into place; fills report's verification figures and
// its seconds since `start`.
void publish(const model::ModelFile& source, model::ClassifierModel& edited, nlohmann::json provenance,
             const LiveOutputs& live, const data::Dataset& verify_data, const ExportRequest& request,
             const io::WriteProgress& progress, std::chrono::steady_clock::time_point start, ExportReport& report) {
  const auto layout = report.layout;
  provenance["edited_from"] = source.path();
  if (layout == ExportLayout::Source) provenance["layout"] = "source";
  io::TemporaryFile staging_file(request.output);
  staging_file.close();
  const std::string staging = staging_file.path();
  const auto staging_sidecar = model::manifest_sidecar_path(staging);
  const int sidecar_token = io::register_temporary(staging_sidecar);
  const bool sidecar = layout == ExportLayout::Source && is_checkpoint_name(request.output);
  std::error_code ec;
  try {
    if (layout == ExportLayout::Mumoe) {
      edited.save(staging, provenance);
    } else if (layout == ExportLayout::Source) {
      write_source_layout(staging, request.output, source, edited, provenance, progress);
    } else {
      std::map<std::string, std::string> metadata = {{"format", "pt"}};
      if (provenance.contains("edits")) metadata["mumoe.edits"] = provenance["edits"].dump();
      if (provenance.contains("removed_experts")) metadata["mumoe.removed_experts"] = provenance["removed_experts"].dump();
      // A backbone's preset and preprocessing cannot be inferred again: the manifest says them
      // (PyTorch ignores the metadata).
      if (edited.has_backbone()) {
        auto m = model::image_classifier_manifest(edited.image_classifier(), edited.label_names(), provenance);
        m.task = edited.multilabel() ? model::kMultiLabel : model::kMultiClass;
        metadata[model::kManifestMetadataKey] = model::to_json(m).dump();
      }
      io::write_safetensors(staging, plain_state_dict(edited), metadata, progress);
    }
    report.max_abs_difference = verify(staging, edited.layer_name(), live, verify_data, request.verify_samples);
    report.verified_samples = std::min(request.verify_samples, verify_data.size());
    if (report.max_abs_difference > request.tolerance)
      throw Error("export verification failed: the reloaded model differs from the live-edited one by " +
                  std::to_string(report.max_abs_difference) + " (tolerance " + std::to_string(request.tolerance) +
                  "); nothing was written to " + request.output);
    // An old sidecar beside the destination describes the old file: it goes first, so that no
    // moment pairs it with the new one (a sidecar also records its file's size).
    const auto output_sidecar = model::manifest_sidecar_path(request.output);
    if (fs::exists(fs::symlink_status(output_sidecar)) && !fs::remove(output_sidecar, ec))
      throw WriteError(output_sidecar, "cannot remove the old manifest beside the destination: " + ec.message());
    staging_file.move_to(request.output);
    if (sidecar) io::move_into_place(staging_sidecar, output_sidecar);
    io::unregister_temporary(sidecar_token);
  } catch (...) {
    staging_file.remove();
    fs::remove(staging_sidecar, ec);
    io::unregister_temporary(sidecar_token);
    throw;
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

ExportLayout parse_export_layout(const std::string& text) {
  if (text == "auto" || text.empty()) return ExportLayout::Auto;
  if (text == "mumoe") return ExportLayout::Mumoe;
  if (text == "reference") return ExportLayout::Reference;
  if (text == "source") return ExportLayout::Source;
  throw UsageError("unknown layout '" + text + "' (expected auto, mumoe, reference or source)");
}

std::string to_string(ExportLayout layout) {
  switch (layout) {
    case ExportLayout::Auto: return "auto";
    case ExportLayout::Mumoe: return "mumoe";
    case ExportLayout::Reference: return "reference";
    case ExportLayout::Source: return "source";
  }
  return "?";
}

ExportReport export_edited_model(const model::ModelFile& source, const std::vector<LogitEdit>& edits,
                                 const data::Dataset& verify_data, const ExportRequest& request,
                                 const io::WriteProgress& progress) {
  const auto start = std::chrono::steady_clock::now();
  if (edits.empty()) throw UsageError("export: there are no edits to fold");
  check_request(source, request);
  for (const auto& e : edits)
    if (e.layer != edits.front().layer)
      throw UsageError("export: edits of several layers (" + edits.front().layer + ", " + e.layer +
                       ") in one file are not supported");

  const auto layout = chosen_layout(source, request);
  auto original = model::ClassifierModel::load(source, source.inferred() ? "" : edits.front().layer);
  check_edits(original.expert_dims().at(0), original.class_count(), edits);
  if (original.is_router() && layout != ExportLayout::Mumoe)
    throw UsageError("export: a " + original.layer_family() + " layer is written in the mumoe layout only (--layout "
                     "mumoe); the reference and source layouts describe μMoE layers");
  original.check_compatible(verify_data);
  auto edited = with_folded_edits(original, edits);

  ExportReport report;
  report.output = request.output;
  report.layout = layout;
  report.edits = static_cast<int64_t>(edits.size());
  report.layer_before = original.layer_config_json();
  report.layer_after = edited.layer_config_json();

  // Provenance: what the model was, plus every edit ever folded into it (earlier exports first).
  auto provenance = source.manifest().provenance;
  auto history = provenance.value("edits", nlohmann::json::array());
  for (const auto& e : edits) history.push_back(to_json(e));
  provenance["edits"] = history;
  auto live = [&](const data::Dataset& data, int64_t begin, int64_t end) {
    const auto inputs = original.layer_inputs(data, begin, end);
    const auto out = original.forward_layer(inputs);
    return apply_edits(out.output, out.coefficients.at(0), edits);
  };
  publish(source, edited, provenance, live, verify_data, request, progress, start, report);
  return report;
}

ExpertRemoval parse_expert_removal(const std::string& text) {
  const auto colon = text.rfind(':');
  ExpertRemoval removal;
  removal.layer = colon == std::string::npos ? "" : text.substr(0, colon);
  const std::string list = colon == std::string::npos ? text : text.substr(colon + 1);
  auto bad = [&](const std::string& why) {
    return UsageError("'" + text + "': " + why + " (expected LAYER:EXPERTS, e.g. mixer_blocks.1.1.fn:3,7)");
  };
  if (colon != std::string::npos && removal.layer.empty()) throw bad("no layer before ':'");
  size_t begin = 0;
  while (true) {
    const auto comma = list.find(',', begin);
    const auto item = list.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin);
    if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos || item.size() > 9)
      throw bad(item.empty() ? "an empty expert number" : "'" + item + "' is not an expert number");
    removal.experts.push_back(std::stoll(item));
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  return removal;
}

nlohmann::json to_json(const ExpertRemoval& removal) {
  return {{"layer", removal.layer}, {"experts", removal.experts}};
}

ExportReport export_without_experts(const model::ModelFile& source, const std::vector<ExpertRemoval>& removals,
                                    const data::Dataset& verify_data, const ExportRequest& request,
                                    const io::WriteProgress& progress) {
  const auto start = std::chrono::steady_clock::now();
  if (removals.empty()) throw UsageError("export: no experts to remove");
  check_request(source, request);
  const auto layout = chosen_layout(source, request);
  const auto& manifest = source.manifest();
  if (model::model_kind(source) == model::ModelKind::Gpt)  // nanoGPT's own files too, not only ours
    throw UsageError(source.path() + " is a μMoE GPT: removing its experts is not supported yet (`mumoe ablate` "
                     "measures their removal); export takes image classifiers and bare μMoE layers");
  const bool image_classifier = manifest.architecture == model::kImageClassifierArchitecture;

  // Each removal's layer by its name: "" is the file's only μMoE layer.
  std::vector<ExpertRemoval> resolved;
  for (auto r : removals) {
    if (r.experts.empty()) throw UsageError("export: no experts given for layer '" + r.layer + "'");
    std::sort(r.experts.begin(), r.experts.end());
    r.experts.erase(std::unique(r.experts.begin(), r.experts.end()), r.experts.end());
    if (r.layer.empty() && manifest.layers.size() > 1) {
      std::string names;
      for (const auto& l : manifest.layers) names += (names.empty() ? "" : ", ") + l.name;
      throw UsageError("export: " + source.path() + " has " + std::to_string(manifest.layers.size()) +
                       " μMoE layers; name the one to remove experts from as LAYER:EXPERTS (" + names + ")");
    }
    r.layer = r.layer.empty() ? source.single_layer().name : source.layer(r.layer).name;
    for (const auto& earlier : resolved)
      if (earlier.layer == r.layer)
        throw UsageError("export: layer '" + r.layer + "' is named twice; give its experts in one list (" + r.layer +
                         ":3,7)");
    const auto experts = source.layer(r.layer).experts();
    for (const auto n : r.experts)
      if (n < 0 || n >= experts)
        throw UsageError("export: layer '" + r.layer + "' has experts 0–" + std::to_string(experts - 1) + ", not " +
                         std::to_string(n));
    resolved.push_back(std::move(r));
  }
  if (!image_classifier && resolved.size() > 1)
    throw UsageError("export: " + source.path() + " holds bare μMoE layers; remove experts of one of them at a time");
  if (layout != ExportLayout::Mumoe)
    for (const auto& r : resolved)
      if (source.layer(r.layer).is_router())
        throw UsageError("export: '" + r.layer + "' is a " + source.layer(r.layer).family() +
                         " layer, written in the mumoe layout only (--layout mumoe); the reference and source "
                         "layouts describe μMoE layers");

  // Two copies of the model: `original` computes the live ablation, `edited` has the slices zeroed.
  const std::string bare_layer = image_classifier ? "" : resolved.front().layer;
  auto original = model::ClassifierModel::load(source, bare_layer);
  auto edited = model::ClassifierModel::load(source, bare_layer);
  const auto data = original.prepare(verify_data);
  original.check_compatible(data);
  nn::ExpertAblation head_ablation;
  std::map<int64_t, nn::ExpertAblation> step_ablations;  // backbone step → its MLP's experts
  {
    torch::NoGradGuard no_grad;
    for (const auto& r : resolved) {
      std::vector<torch::Tensor> slices;
      const auto step = image_classifier ? model::backbone_layer_step(r.layer) : std::nullopt;
      if (!step) {
        head_ablation = nn::ExpertAblation::first_mode(r.experts);
        slices = edited.is_router() ? nn::expert_slices(edited.router_layer(), r.experts)
                                    : nn::expert_slices(edited.layer(), r.experts);
      } else {
        auto* tokens = edited.image_classifier()->backbone()->tokens();
        if (tokens == nullptr || (tokens->mumoe_mlp(*step).is_empty() && tokens->router_mlp(*step).is_empty()))
          throw UsageError("export: the backbone of " + source.path() + " has no expert layer '" + r.layer + "'");
        step_ablations[*step] = nn::ExpertAblation::first_mode(r.experts);
        slices = tokens->router_mlp(*step).is_empty() ? nn::expert_slices(tokens->mumoe_mlp(*step), r.experts)
                                                      : nn::expert_slices(tokens->router_mlp(*step), r.experts);
      }
      for (auto& slice : slices) slice.zero_();
    }
  }

  ExportReport report;
  report.output = request.output;
  report.layout = layout;
  report.removed = resolved;
  auto provenance = manifest.provenance;
  auto history = provenance.value("removed_experts", nlohmann::json::array());
  for (const auto& r : resolved) history.push_back(to_json(r));
  provenance["removed_experts"] = history;
  auto live = [&](const data::Dataset& data, int64_t begin, int64_t end) {
    if (!original.has_backbone()) return original.forward_layer(original.layer_inputs(data, begin, end), head_ablation).output;
    auto classifier = original.image_classifier();
    const auto prepared = original.backbone_inputs(data, torch::arange(begin, end, torch::kLong), torch::kCPU);
    torch::Tensor features;
    if (step_ablations.empty()) {
      features = classifier->backbone_features(prepared);
    } else {
      auto* tokens = classifier->backbone()->tokens();
      auto stream = tokens->embed(prepared);
      for (int64_t step = 0; step < tokens->depth(); ++step) {
        const auto it = step_ablations.find(step);
        stream = tokens->run_block(stream, step, it == step_ablations.end() ? nn::ExpertAblation{} : it->second);
      }
      features = tokens->pool(stream);
    }
    return classifier->classify(features, head_ablation).output;
  };
  publish(source, edited, provenance, live, data, request, progress, start, report);
  return report;
}

ExportReport export_model_without_experts(const std::string& model_path, const std::vector<ExpertRemoval>& removals,
                                          const std::string& data_spec, const ExportRequest& request) {
  return export_without_experts(model::ModelFile::load(model_path), removals, data::load_dataset(data_spec), request);
}

nlohmann::json to_json(const ExportReport& r) {
  nlohmann::json removed = nlohmann::json::array();
  for (const auto& x : r.removed) removed.push_back(to_json(x));
  return {{"output", r.output},
          {"layout", to_string(r.layout)},
          {"edits", r.edits},
          {"removed_experts", removed},
          {"layer_before", r.layer_before},
          {"layer_after", r.layer_after},
          {"max_abs_difference", r.max_abs_difference},
          {"verified_samples", r.verified_samples},
          {"seconds", r.seconds}};
}

}  // namespace mumoe::editing
