#include "analysis/vit_block_analysis.h"

#include "nn/expert_slices.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "analysis/content_hash.h"
#include "analysis/extraction.h"
#include "data/dataset.h"
#include "io/errors.h"
#include "model/classifier_file.h"
#include "model/classifier_model.h"
#include "model/manifest.h"
#include "model/model_file.h"
#include "nn/device.h"
#include "nn/module_state.h"

namespace mumoe::analysis {
namespace {

// The residual streams kept for the sparse method (float64): ViT-B/32's 50 tokens × 768 make
// 0.3 MB per image, so 4 GB is about 13,000 ImageNet images.
constexpr double kMaxStreamBytes = 4e9;
// The router sweep evaluates every expert's removal for a batch of images at once: images ×
// experts class-token rows through the pooling and the head per step — 16,384 rows of width D in
// float64, 8 MB at this project's D = 64, 100 MB at ViT-B's 768 (the step's routing pass itself
// holds the images' slots, as the baseline pass's batches do).
constexpr int64_t kSweepRows = 16384;

nn::TokenBackbone* token_backbone(const model::ClassifierModel& m) {
  auto* tokens = m.has_backbone() ? m.image_classifier()->backbone()->tokens() : nullptr;
  if (!tokens)
    throw UsageError("block MLPs can be analysed only in a ViT or MLP-Mixer image classifier; this model's layer is '" +
                     m.layer_name() + "'");
  // A router head routes groups of images together, so re-running only the images an ablation
  // affects would route them differently from the baseline: no exact sparse method yet.
  if (m.is_router())
    throw UsageError("block MLPs are analysed in ViTs with a μMoE head; this model's head is a " + m.layer_family() +
                     " layer");
  return tokens;
}

// An independent float64 copy of the classifier on `device`, in eval mode.
model::ClassifierModel copy_model(const model::ClassifierModel& source, const torch::Device& device) {
  return model::ClassifierModel::from_image_classifier(
      nn::copy_image_classifier(source.image_classifier(), torch::kFloat64, device), source.label_names(),
      source.multilabel());
}

}  // namespace

struct VitBlockAnalysis::Impl {
  Impl(data::Dataset data, int64_t block, const VitBlockOptions& options)
      : data(std::move(data)), block(block), batch(options.batch_size), device(nn::parse_device(options.device)) {}
  void check(const std::vector<int64_t>& experts) const;
  // Logits from the stream block L's MLP reads (attention_residual of block L), its experts
  // ablated as `ablation`.
  torch::Tensor logits_from_attended(const torch::Tensor& attended, const nn::ExpertAblation& ablation);
  // A router MLP in the last block of a class-token ViT: the logits of each image under each
  // ablation row of `removed` [R, N] (undefined: each expert alone, R = N), [B, R, classes], from
  // the images' whole attended streams (the routing needs every token; only the class token's
  // output is recomputed).
  torch::Tensor logits_without(const torch::Tensor& attended, const torch::Tensor& removed);
  /// The outcome of removing `experts` from the predictions after it and the affected count.
  AblationOutcome outcome(const std::vector<int64_t>& experts, const std::vector<int64_t>& after,
                          int64_t affected) const;
  /// sweep(Sparse) for a router MLP when class_token_only: every expert per batch of images.
  std::vector<AblationOutcome> router_class_token_sweep(const SweepCallback& progress);
  std::vector<int64_t> predict(const torch::Tensor& logits) const;
  /// Fills `images` and `strongest_patch` from `coefficients`, labels and predictions.
  void build_image_run();
  nn::TokenBackbone* tokens() { return model.image_classifier()->backbone()->tokens(); }
  int64_t samples() const { return static_cast<int64_t>(labels.size()); }

  model::ClassifierModel model;  ///< float64 copy
  data::Dataset data;
  std::vector<std::string> class_names;
  int64_t block;
  int64_t batch;
  int64_t experts = 0, patches = 0, prefix_tokens = 0, grid = 0;
  /// The MLP's coefficient rows are the stream's tokens (else a Mixer's channels: no patch).
  bool rows_are_tokens = true;
  torch::Device device;
  /// Block L's attention residual (its MLP's input stream) on device: [S, T, D], or [S, 1, D]
  /// (the class tokens) when class_token_only and the MLP is a μMoE block (a router MLP routes
  /// each image's tokens together, so it keeps them all).
  torch::Tensor attended;
  /// L is the last block and pooling reads the class token: only token 0's MLP output matters.
  bool class_token_only = false;
  /// Block L's MLP is a sparse or soft MoE layer (else a μMoE block).
  bool router = false;
  torch::Tensor coefficients;  ///< [S, T, N] float64 CPU
  /// Per image and expert, the strongest patch token: its coefficient (image_run's rows) and
  /// where it is. [S, N] int64 CPU.
  RunData images;
  torch::Tensor strongest_patch;
  std::vector<int64_t> labels, predictions;
  ClassAccuracy before;
};

namespace {

// The layer options.layer names, or — when none is named and the classifier's head is a plain
// Linear layer (an MLP-Mixer) — its last backbone μMoE layer; "" when the question is not about
// a backbone layer of an image classifier.
std::string backbone_layer_of(const SessionOptions& options, const model::ModelFile& file) {
  if (file.manifest().architecture != model::kImageClassifierArchitecture) return "";
  if (options.layer.empty()) {
    if (!model::manifest_linear_head(file.manifest(), file.path())) return "";
    std::string last;
    for (const auto& layer : file.manifest().layers)
      if (model::backbone_layer_step(layer.name)) last = layer.name;
    return last;
  }
  if (!model::backbone_layer_step(options.layer)) return "";
  for (const auto& layer : file.manifest().layers)
    if (layer.name == options.layer) return options.layer;
  return "";
}

}  // namespace

bool names_vit_block(const SessionOptions& options) {
  if (!options.layer.empty() && !model::backbone_layer_step(options.layer)) return false;
  const auto file = model::ModelFile::load(options.model_path, options.overrides);
  // A Linear-head classifier has nothing else to analyse: every question goes to its backbone
  // (and names its layers when it has none).
  if (options.layer.empty() && file.manifest().architecture == model::kImageClassifierArchitecture &&
      model::manifest_linear_head(file.manifest(), file.path()))
    return true;
  return !backbone_layer_of(options, file).empty();
}

std::unique_ptr<VitBlockAnalysis> VitBlockAnalysis::open(const SessionOptions& options, VitBlockOptions o,
                                                         const SweepCallback& progress) {
  const auto file = model::ModelFile::load(options.model_path, options.overrides);
  const auto layer = backbone_layer_of(options, file);
  if (layer.empty()) {
    if (!options.layer.empty()) file.layer(options.layer);  // names the file's layers when it has no such one
    if (options.layer.empty() && model::manifest_linear_head(file.manifest(), file.path()))
      throw UsageError(options.model_path + ": a Linear head and no μMoE layer in its backbone: nothing to analyse");
    throw UsageError("'" + options.layer + "' names no μMoE layer in the backbone of " + options.model_path +
                     " (blocks.{i}.mlp in a ViT; mixer_blocks.{i}.0.fn.1 or mixer_blocks.{i}.1.fn in an MLP-Mixer)");
  }
  const auto classifier = model::ClassifierModel::load(file);
  if (classifier.multilabel())  // (the constructor checks it too, without the file's name)
    throw UsageError(options.model_path + " is a multi-label model: the expert analysis of its backbone layers is "
                     "not supported (its μMoE head's is: --layer head)");
  o.device = options.device;
  return std::make_unique<VitBlockAnalysis>(classifier, data::load_dataset(options.data_spec),
                                            *model::backbone_layer_step(layer), o, progress);
}

VitBlockAnalysis::VitBlockAnalysis(const model::ClassifierModel& model, const data::Dataset& data, int64_t block,
                                   const VitBlockOptions& options, const SweepCallback& progress)
    : impl_(std::make_unique<Impl>(data, block, options)) {
  if (options.limit < 0) throw UsageError("the number of images to analyse cannot be negative");
  if (options.batch_size <= 0) throw UsageError("the batch size must be positive");
  const int64_t limit = options.limit;
  auto& d = *impl_;
  auto* source_tokens = token_backbone(model);
  if (block < 0 || block >= source_tokens->depth())
    throw UsageError("the backbone has blocks 0–" + std::to_string(source_tokens->depth() - 1) + ", not " +
                     std::to_string(block));
  if (source_tokens->mumoe_mlp(block).is_empty() && source_tokens->router_mlp(block).is_empty())
    throw UsageError(model::backbone_layer_name(model.image_classifier()->backbone_config().kind, block) +
                     " is a plain MLP, not a μMoE block or MoE layer");
  if (model.multilabel()) throw UsageError("block ablation reports per-class accuracy: a multi-class model is needed");
  if (auto router = source_tokens->router_mlp(block); !router.is_empty()) {
    // Re-running some images (the sparse method) routes them as the baseline did only when each
    // image is its own routing group.
    const auto& c = router->config();
    const auto& v = model.image_classifier()->backbone_config();
    const int64_t image_tokens = (v.image_size / v.patch_size()) * (v.image_size / v.patch_size()) +
                                 source_tokens->prefix_tokens();
    if (c.router != nn::RouterKind::SoftMoE && !c.sequence_groups && c.group_size != image_tokens)
      throw UsageError("block " + std::to_string(block) + "'s " + nn::display_name(c.router) +
                       " MLP routes groups of " + (c.group_size > 0 ? std::to_string(c.group_size) + " tokens" : std::string("a whole batch")) +
                       ", not one image's " + std::to_string(image_tokens) +
                       ": an image's routing would depend on the other images of its batch, so ablation could not be exact");
  }
  // Its accuracy and ablation read one class per image (an argmax).
  if (model.multilabel())
    throw UsageError("a multi-label model: the expert analysis of its backbone layers is not supported (its μMoE "
                     "head's is: --layer head)");
  model.check_compatible(d.data);
  d.class_names = model.label_names().empty() ? d.data.class_names : model.label_names();
  while (static_cast<int64_t>(d.class_names.size()) < model.class_count())
    d.class_names.push_back(std::to_string(d.class_names.size()));
  d.model = copy_model(model, d.device);
  auto* tokens = d.tokens();
  d.router = !tokens->router_mlp(block).is_empty();
  d.experts = d.router ? tokens->router_mlp(block)->config().experts : tokens->mumoe_mlp(block)->config().expert_dims.front();
  const auto& b = d.model.image_classifier()->backbone_config();
  d.grid = b.image_size / b.patch_size();
  d.rows_are_tokens = tokens->mlp_rows_are_tokens(block);
  d.patches = d.grid * d.grid;
  d.prefix_tokens = tokens->prefix_tokens();

  int64_t total = limit > 0 ? std::min(limit, d.data.size()) : d.data.size();
  if (total == 0) throw UsageError("the data has no samples");
  // The kept streams are the memory this analysis needs:
  // refuse what cannot fit, or (fit_in_memory) take the first images that do.
  d.class_token_only = block == tokens->depth() - 1 && tokens->pools_class_token();
  // A router MLP mixes an image's tokens (Soft MoE's slots, a group's buffer allocation), so the
  // class token's output needs the whole image's stream to be recomputed.
  const bool keep_class_tokens = d.class_token_only && !d.router;
  const int64_t kept_tokens = keep_class_tokens ? 1 : d.patches + d.prefix_tokens;
  const double stream_bytes = 8.0 * static_cast<double>(total) * static_cast<double>(kept_tokens) *
                              static_cast<double>(b.feature_dim);
  const auto fitting = static_cast<int64_t>(static_cast<double>(total) * kMaxStreamBytes / stream_bytes);
  if (stream_bytes > kMaxStreamBytes && options.fit_in_memory && fitting > 0) {
    total = fitting;
  } else if (stream_bytes > kMaxStreamBytes) {
    char need[32];
    std::snprintf(need, sizeof need, "%.1f GB", stream_bytes / 1e9);
    throw UsageError("analysing block " + std::to_string(block) + " keeps each image's stream after its attention: " +
                     std::to_string(total) + " images need " + need + ", more than " +
                     std::to_string(static_cast<int64_t>(kMaxStreamBytes / 1e9)) + " GB; analyse at most " +
                     std::to_string(fitting) + " images");
  }
  // Each batch is written into its rows of the whole-run tensors, allocated at the first batch:
  // collecting the batches and joining them (torch::cat) held the streams and the [S, T, N]
  // float64 coefficients twice at the end.
  std::vector<torch::Tensor> logits;
  torch::NoGradGuard no_grad;
  for (int64_t begin = 0; begin < total; begin += d.batch) {
    const int64_t end = std::min(total, begin + d.batch);
    const auto indices = torch::arange(begin, end, torch::kLong);
    auto x = tokens->embed(d.model.backbone_inputs(d.data, indices, d.device).to(torch::kFloat64));
    for (int64_t i = 0; i < block; ++i) x = tokens->run_block(x, i);
    x = tokens->attention_residual(x, block);
    const auto kept = keep_class_tokens ? x.slice(1, 0, 1) : x;
    const auto coefficients = tokens->mlp_coefficients(x, block).front().cpu();
    if (begin == 0) {
      d.attended = torch::empty({total, kept.size(1), kept.size(2)}, kept.options());
      d.coefficients = torch::empty({total, coefficients.size(1), coefficients.size(2)}, coefficients.options());
    }
    d.attended.slice(0, begin, end).copy_(kept);
    d.coefficients.slice(0, begin, end).copy_(coefficients);
    logits.push_back(d.logits_from_attended(x, {}));
    if (progress && !progress(end, total)) throw Cancelled();
  }
  const auto label_tensor = d.data.labels.slice(0, 0, total).contiguous();
  d.labels.assign(label_tensor.data_ptr<int64_t>(), label_tensor.data_ptr<int64_t>() + total);
  d.predictions = d.predict(torch::cat(logits));
  d.before = class_accuracy(d.labels, d.predictions, d.model.class_count());
  d.build_image_run();
}

VitBlockAnalysis::~VitBlockAnalysis() = default;

int64_t VitBlockAnalysis::block() const { return impl_->block; }
std::string VitBlockAnalysis::layer_name() const {
  return model::backbone_layer_name(impl_->model.image_classifier()->backbone_config().kind, impl_->block);
}
bool VitBlockAnalysis::rows_are_patches() const { return impl_->rows_are_tokens; }
int64_t VitBlockAnalysis::coefficient_rows() const { return impl_->coefficients.size(1); }
model::ModelLayer VitBlockAnalysis::manifest_layer() const {
  model::ModelLayer layer;
  layer.name = layer_name();
  layer.prefix = layer.name + ".";
  auto* tokens = impl_->model.image_classifier()->backbone()->tokens();
  if (impl_->router)
    layer.router = tokens->router_mlp(impl_->block)->config();
  else
    layer.config = tokens->mumoe_mlp(impl_->block)->config();
  return layer;
}
int64_t VitBlockAnalysis::strongest_row(int64_t sample, int64_t expert) const {
  if (sample < 0 || sample >= samples() || expert < 0 || expert >= experts())
    throw UsageError("sample " + std::to_string(sample) + ", expert " + std::to_string(expert) + " is not in the analysis");
  return impl_->strongest_patch.data_ptr<int64_t>()[sample * impl_->experts + expert];
}
const std::vector<std::string>& VitBlockAnalysis::class_names() const { return impl_->class_names; }
int64_t VitBlockAnalysis::samples() const { return impl_->samples(); }
int64_t VitBlockAnalysis::images_available() const { return impl_->data.size(); }
int64_t VitBlockAnalysis::experts() const { return impl_->experts; }
int64_t VitBlockAnalysis::patches() const { return impl_->patches; }
int64_t VitBlockAnalysis::prefix_tokens() const { return impl_->prefix_tokens; }
int64_t VitBlockAnalysis::grid() const { return impl_->grid; }
const std::vector<int64_t>& VitBlockAnalysis::labels() const { return impl_->labels; }
const std::vector<int64_t>& VitBlockAnalysis::predictions_before() const { return impl_->predictions; }
const ClassAccuracy& VitBlockAnalysis::accuracy_before() const { return impl_->before; }

std::vector<double> VitBlockAnalysis::token_coefficients(int64_t sample) const {
  if (sample < 0 || sample >= samples())
    throw UsageError("sample " + std::to_string(sample) + " was not analysed (0–" + std::to_string(samples() - 1) + ")");
  const auto row = impl_->coefficients[sample].contiguous();
  return {row.data_ptr<double>(), row.data_ptr<double>() + row.numel()};
}

torch::Tensor VitBlockAnalysis::Impl::logits_from_attended(const torch::Tensor& attended_rows,
                                                          const nn::ExpertAblation& ablation) {
  auto x = tokens()->mlp_residual(attended_rows, block, ablation);
  for (int64_t i = block + 1; i < tokens()->depth(); ++i) x = tokens()->run_block(x, i);
  return model.image_classifier()->classify(tokens()->pool(x)).output;
}

torch::Tensor VitBlockAnalysis::Impl::logits_without(const torch::Tensor& attended_rows, const torch::Tensor& removed) {
  const auto streams = tokens()->router_mlp_token_residuals(attended_rows, block, 0, removed);  // [B, R, D]
  const int64_t b = streams.size(0), r = streams.size(1);
  const auto features = tokens()->pool(streams.reshape({b * r, 1, streams.size(2)}));
  return model.image_classifier()->classify(features).output.view({b, r, -1});
}

std::vector<int64_t> VitBlockAnalysis::Impl::predict(const torch::Tensor& logits) const {
  const auto best = logits.argmax(1).cpu().contiguous();
  return {best.data_ptr<int64_t>(), best.data_ptr<int64_t>() + best.numel()};
}

void VitBlockAnalysis::Impl::check(const std::vector<int64_t>& list) const {
  if (list.empty()) throw UsageError("no experts to ablate");
  require_distinct_experts(list);
  for (auto n : list)
    if (n < 0 || n >= experts)
      throw UsageError("block " + std::to_string(block) + "'s μMoE MLP has experts 0–" + std::to_string(experts - 1) +
                       ", not " + std::to_string(n));
}

std::vector<int64_t> VitBlockAnalysis::affected_samples(const std::vector<int64_t>& experts) const {
  impl_->check(experts);
  const auto index = torch::tensor(experts, torch::kLong);
  // After the last block a class-token pooling reads token 0 alone; else attention in the later
  // blocks carries any token's change to the features.
  const auto& c = impl_->coefficients;
  const auto hit = ((impl_->class_token_only ? c.slice(1, 0, 1) : c).index_select(2, index) > 0).flatten(1).any(1);
  const auto ids = hit.nonzero().flatten().contiguous();
  return {ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel()};
}

bool VitBlockAnalysis::class_tokens_only() const { return impl_->class_token_only; }

std::vector<int64_t> VitBlockAnalysis::predictions_after(const std::vector<int64_t>& experts, AblationMethod method) {
  return predictions_after(experts, method,
                           method == AblationMethod::Sparse ? affected_samples(experts) : std::vector<int64_t>{}, {});
}

std::vector<int64_t> VitBlockAnalysis::predictions_after(const std::vector<int64_t>& experts, AblationMethod method,
                                                         const std::vector<int64_t>& affected,
                                                         const std::function<bool()>& cancelled) {
  auto& d = *impl_;
  d.check(experts);
  torch::NoGradGuard no_grad;
  auto out = d.predictions;
  if (method == AblationMethod::Naive) {
    // The paper's protocol on the copy: zero the experts' factor slices, run the model's own
    // forward over every image, restore the slices.
    auto classifier = d.model.image_classifier();
    auto router = d.tokens()->router_mlp(d.block);
    auto slices = router.is_empty() ? nn::expert_slices(d.tokens()->mumoe_mlp(d.block), experts)
                                    : nn::expert_slices(router, experts);
    std::vector<torch::Tensor> saved;
    for (auto& slice : slices) {
      saved.push_back(slice.clone());
      slice.zero_();
    }
    try {
      for (int64_t begin = 0; begin < d.samples(); begin += d.batch) {
        if (cancelled && cancelled()) throw Cancelled();
        const auto indices = torch::arange(begin, std::min(d.samples(), begin + d.batch), torch::kLong);
        const auto features = classifier->backbone_features(d.model.backbone_inputs(d.data, indices, d.device).to(torch::kFloat64));
        const auto predicted = d.predict(classifier->classify(features).output);
        std::copy(predicted.begin(), predicted.end(), out.begin() + begin);
      }
    } catch (...) {
      for (size_t i = 0; i < slices.size(); ++i) slices[i].copy_(saved[i]);
      throw;
    }
    for (size_t i = 0; i < slices.size(); ++i) slices[i].copy_(saved[i]);
    return out;
  }
  const auto ablation = nn::ExpertAblation::first_mode(experts);
  // A router MLP before the class-token pooling: one routing pass per image, its experts'
  // contributions to the class token subtracted (the experts' outputs do not steer the routing).
  torch::Tensor removed;
  if (d.router && d.class_token_only) {
    removed = torch::zeros({1, d.experts}, torch::kFloat64);
    for (const auto n : experts) removed[0][n] = 1.0;
    removed = removed.to(d.device);
  }
  const auto batch = static_cast<size_t>(d.batch);
  for (size_t begin = 0; begin < affected.size(); begin += batch) {
    if (cancelled && cancelled()) throw Cancelled();
    const std::vector<int64_t> ids(affected.begin() + static_cast<std::ptrdiff_t>(begin),
                                   affected.begin() + static_cast<std::ptrdiff_t>(std::min(affected.size(), begin + batch)));
    const auto index = torch::tensor(ids, torch::kLong).to(d.device);
    const auto rows = d.attended.index_select(0, index);
    const auto predicted = d.predict(removed.defined() ? d.logits_without(rows, removed).select(1, 0)
                                                       : d.logits_from_attended(rows, ablation));
    for (size_t i = 0; i < ids.size(); ++i) out[static_cast<size_t>(ids[i])] = predicted[i];
  }
  return out;
}

AblationOutcome VitBlockAnalysis::Impl::outcome(const std::vector<int64_t>& experts, const std::vector<int64_t>& after,
                                                int64_t affected) const {
  AblationOutcome o;
  o.experts = experts;
  o.after = class_accuracy(labels, after, model.class_count());
  o.drop = accuracy_drop(before, o.after);
  o.polysemanticity = polysemanticity(o.drop);
  o.has_effect = has_effect(o.drop);
  o.affected_samples = affected;
  for (size_t i = 0; i < after.size(); ++i) o.changed_predictions += after[i] != predictions[i];
  return o;
}

AblationOutcome VitBlockAnalysis::ablate(const std::vector<int64_t>& experts, AblationMethod method,
                                         const std::function<bool()>& cancelled) {
  const auto affected = affected_samples(experts);
  const auto after = predictions_after(experts, method, affected, cancelled);
  return impl_->outcome(experts, after, static_cast<int64_t>(affected.size()));
}

std::vector<AblationOutcome> VitBlockAnalysis::Impl::router_class_token_sweep(const SweepCallback& progress) {
  torch::NoGradGuard no_grad;
  const int64_t n = experts, total = samples();
  // after[e][s]: image s's prediction without expert e; only images whose class token expert e
  // reaches change (affected_samples), so the others keep the baseline's prediction exactly.
  std::vector<std::vector<int64_t>> after(static_cast<size_t>(n), predictions);
  std::vector<int64_t> affected(static_cast<size_t>(n), 0);
  const auto reaches = (coefficients.select(1, 0) > 0).contiguous();  // [S, N]
  const bool* reach = reaches.data_ptr<bool>();
  const int64_t step = std::max<int64_t>(1, std::min(batch, kSweepRows / n));
  for (int64_t begin = 0; begin < total; begin += step) {
    // Progress in experts' units, as the expert-by-expert sweeps report it.
    if (progress && !progress(begin * n / total, n)) throw Cancelled();
    const int64_t end = std::min(total, begin + step);
    const auto best = logits_without(attended.slice(0, begin, end), {}).argmax(2).cpu().contiguous();  // [B, N]
    const int64_t* predicted = best.data_ptr<int64_t>();
    for (int64_t s = begin; s < end; ++s)
      for (int64_t e = 0; e < n; ++e)
        if (reach[s * n + e]) {
          after[static_cast<size_t>(e)][static_cast<size_t>(s)] = predicted[(s - begin) * n + e];
          ++affected[static_cast<size_t>(e)];
        }
  }
  std::vector<AblationOutcome> outcomes;
  outcomes.reserve(static_cast<size_t>(n));
  for (int64_t e = 0; e < n; ++e)
    outcomes.push_back(outcome({e}, after[static_cast<size_t>(e)], affected[static_cast<size_t>(e)]));
  if (progress && !progress(n, n)) throw Cancelled();
  return outcomes;
}

SweepOutcome VitBlockAnalysis::sweep(AblationMethod method, const SweepCallback& progress, ExpertRange experts) {
  const auto start = std::chrono::steady_clock::now();
  const auto range = experts.within(impl_->experts);
  const int64_t total = range.end - range.begin;
  SweepOutcome s;
  s.method = method;
  if (method == AblationMethod::Sparse && impl_->router && impl_->class_token_only) {
    auto all = impl_->router_class_token_sweep(progress);
    s.experts.assign(all.begin() + range.begin, all.begin() + range.end);
  } else {
    for (int64_t n = range.begin; n < range.end; ++n) {
      const int64_t done = n - range.begin;
      // Cancel between batches too: an early block's expert re-runs thousands of images.
      s.experts.push_back(ablate({n}, method, [&] { return progress && !progress(done, total); }));
      if (progress && !progress(done + 1, total)) throw Cancelled();
    }
  }
  summarise_sweep(s);
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return s;
}

cache::RunKey VitBlockAnalysis::run_key(const std::string& model_path) const {
  const auto& d = *impl_;
  cache::RunKey key;
  key.model_hash = hash_file(model_path);
  key.model_path = model_path;
  key.data_identity = d.data.identity;
  key.data_hash = data_content_hash(d.data);
  key.layer = layer_name();
  // The block's own configuration too: a plain state dict's gate activation or norm comes from
  // the options it was opened with, which the backbone's JSON does not hold.
  auto* tokens = impl_->tokens();
  const auto layer = d.router ? model::to_json(tokens->router_mlp(d.block)->config())
                              : model::to_json(tokens->mumoe_mlp(d.block)->config());
  key.parameters = nlohmann::json({{"backbone_analysis_version", 1},
                                   {"images", samples()},
                                   {"layer_dtype", "float64"},
                                   {"batch_size", d.batch},
                                   {"backbone", nn::to_json(d.model.image_classifier()->backbone_config())},
                                   {"layer_config", layer}})
                       .dump();
  return key;
}

cache::RunInfo VitBlockAnalysis::run_info() const {
  cache::RunInfo info;
  info.sample_count = samples();
  info.chunk_size = samples();  // one notional chunk, never stored: the run holds answers only
  info.output_dim = impl_->model.class_count();
  info.expert_dims = {experts()};
  return info;
}

void VitBlockAnalysis::Impl::build_image_run() {
  // Each image's strongest patch per expert; the class token is no place in the image.
  const auto best = coefficients.slice(1, prefix_tokens).max(1);
  const auto values = std::get<0>(best).contiguous();  // [S, N]
  strongest_patch = std::get<1>(best).contiguous();
  const double* value = values.data_ptr<double>();
  images = RunData{};
  images.info.sample_count = samples();
  images.info.chunk_size = samples();
  images.info.output_dim = model.class_count();
  images.info.expert_dims = {experts};
  images.labels = labels;
  images.predictions = predictions;
  cache::SparseRows rows;
  rows.offsets.reserve(static_cast<size_t>(samples()) + 1);
  rows.offsets.push_back(0);
  for (int64_t s = 0; s < samples(); ++s) {
    for (int64_t n = 0; n < experts; ++n)
      if (const double a = value[s * experts + n]; a > 0) {
        rows.indices.push_back(static_cast<int32_t>(n));
        rows.values.push_back(a);
      }
    rows.offsets.push_back(static_cast<int64_t>(rows.values.size()));
  }
  images.coefficients.push_back(std::move(rows));
  images.finish();
}

const RunData& VitBlockAnalysis::image_run() const { return impl_->images; }

ModeStatistics VitBlockAnalysis::statistics(double threshold) const {
  return expert_statistics(impl_->images, 0, impl_->model.class_count(), threshold);
}

Gallery VitBlockAnalysis::gallery(const GalleryRequest& request) const {
  if (request.mode != 0) throw UsageError(layer_name() + " has one expert mode (0), not " + std::to_string(request.mode));
  auto g = select_gallery(impl_->images, request);
  const int64_t* where = impl_->strongest_patch.data_ptr<int64_t>();
  // A token-mixing MLP's strongest row is a channel, no place in the image: no patch outlined.
  for (auto& item : g.items) item.patch = impl_->rows_are_tokens ? where[item.sample * impl_->experts + request.expert] : -1;
  return g;
}

SampleImage VitBlockAnalysis::image(int64_t sample, int64_t patch) const {
  const auto& d = *impl_;
  if (sample < 0 || sample >= d.samples())
    throw UsageError("sample " + std::to_string(sample) + " was not analysed (0–" + std::to_string(d.samples() - 1) + ")");
  if (patch < -1 || patch >= d.patches)
    throw UsageError("patch " + std::to_string(patch) + " is outside the " + std::to_string(d.grid) + "×" +
                     std::to_string(d.grid) + " patch grid");
  torch::NoGradGuard no_grad;
  const auto& b = d.model.image_classifier()->backbone_config();
  auto x = d.model.backbone_inputs(d.data, torch::tensor({sample}, torch::kLong), torch::kCPU)
               .squeeze(0)
               .to(torch::kFloat64);
  if (b.preprocess.enabled) {  // undo the normalisation
    const auto mean = torch::tensor(std::vector<double>(b.preprocess.mean.begin(), b.preprocess.mean.end()), torch::kFloat64);
    const auto std = torch::tensor(std::vector<double>(b.preprocess.std.begin(), b.preprocess.std.end()), torch::kFloat64);
    x = x * std.view({3, 1, 1}) + mean.view({3, 1, 1});
  }
  if (x.size(0) == 1) x = x.expand({3, -1, -1});
  auto rgb = (x.clamp(0, 1) * 255).round().to(torch::kUInt8).permute({1, 2, 0}).contiguous();
  if (patch >= 0) {  // a one-pixel yellow frame just inside the patch
    const int64_t p = b.patch_size(), top = patch / d.grid * p, left = patch % d.grid * p;
    const auto yellow = torch::tensor({255, 220, 0}, torch::kUInt8);
    rgb.slice(0, top, top + p).slice(1, left, left + 1).copy_(yellow.expand({p, 1, 3}));
    rgb.slice(0, top, top + p).slice(1, left + p - 1, left + p).copy_(yellow.expand({p, 1, 3}));
    rgb.slice(0, top, top + 1).slice(1, left, left + p).copy_(yellow.expand({1, p, 3}));
    rgb.slice(0, top + p - 1, top + p).slice(1, left, left + p).copy_(yellow.expand({1, p, 3}));
  }
  SampleImage image;
  image.height = rgb.size(0);
  image.width = rgb.size(1);
  image.channels = 3;
  image.pixels.assign(rgb.data_ptr<uint8_t>(), rgb.data_ptr<uint8_t>() + rgb.numel());
  return image;
}

}  // namespace mumoe::analysis
