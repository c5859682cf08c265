#include "analysis/predictions.h"

#include <torch/torch.h>

#include <map>

#include "analysis/lm_eval_set.h"
#include "data/dataset.h"
#include "io/errors.h"
#include "model/classifier_model.h"
#include "model/manifest.h"
#include "nn/device.h"

namespace mumoe::analysis {
namespace {

// Adds one batch's coefficients of layer `name` (per expert mode) to `out`, in first-seen order.
void collect(std::vector<std::pair<std::string, std::vector<torch::Tensor>>>& out, std::map<std::string, size_t>& where,
             const std::string& name, const std::vector<torch::Tensor>& modes) {
  for (size_t e = 0; e < modes.size(); ++e) {
    const auto key = e == 0 ? name : name + ".mode" + std::to_string(e);
    auto [it, added] = where.emplace(key, out.size());
    if (added) out.push_back({key, {}});
    out[it->second].second.push_back(modes[e].detach().to(torch::kCPU, torch::kFloat32));
  }
}

}  // namespace

Predictions predict(model::ClassifierModel& model, const data::Dataset& data, int64_t limit, int64_t batch,
                    bool with_coefficients, const std::string& device_name, const SweepCallback& progress) {
  if (limit < 0) throw UsageError("the number of samples to predict cannot be negative");
  if (batch <= 0) throw UsageError("the batch size must be positive");
  model.check_compatible(data);
  const auto device = nn::parse_device(device_name);
  const int64_t total = limit > 0 ? std::min(limit, data.size()) : data.size();
  if (total == 0) throw UsageError(data.identity + " has no samples");
  torch::NoGradGuard no_grad;
  model.module().to(device);
  model.module().eval();
  std::vector<torch::Tensor> logits;
  std::vector<std::pair<std::string, std::vector<torch::Tensor>>> layers;
  std::map<std::string, size_t> where;
  for (int64_t begin = 0; begin < total; begin += batch) {
    const int64_t end = std::min(total, begin + batch);
    const auto indices = torch::arange(begin, end, torch::kLong);
    nn::BlockOutput out;
    if (!model.has_backbone()) {
      out = model.forward(data, indices, device);
    } else {
      auto classifier = model.image_classifier();
      const auto prepared = model.backbone_inputs(data, indices, device);
      auto* tokens = with_coefficients ? classifier->backbone()->tokens() : nullptr;
      torch::Tensor features;
      if (!tokens) {
        features = classifier->backbone_features(prepared);
      } else {
        // The backbone step by step, keeping each expert layer's coefficients on its way.
        const auto kind = classifier->backbone_config().kind;
        auto x = tokens->embed(prepared);
        for (int64_t step = 0; step < tokens->depth(); ++step) {
          const auto attended = tokens->attention_residual(x, step);
          if (tokens->mumoe_mlp(step).is_empty() && tokens->router_mlp(step).is_empty()) {
            x = tokens->mlp_residual(attended, step);
            continue;
          }
          std::vector<torch::Tensor> coefficients;
          x = tokens->mlp_residual_keeping(attended, step, coefficients);
          collect(layers, where, model::backbone_layer_name(kind, step), coefficients);
        }
        features = tokens->pool(x);
      }
      out = classifier->classify(features);
    }
    logits.push_back(out.output.detach().to(torch::kCPU, torch::kFloat32));
    if (with_coefficients && !out.coefficients.empty()) collect(layers, where, model.layer_name(), out.coefficients);
    if (progress && !progress(end, total)) throw Cancelled();
  }
  Predictions p;
  p.logits = torch::cat(logits);
  // The head comes last in the forward; the backbone's layers were met first.
  for (auto& [name, parts] : layers) p.coefficients.push_back({name, torch::cat(parts)});
  return p;
}

Predictions predict_lm(nn::MuMoEGpt& gpt, const LmEvalSet& set, int64_t batch, bool with_coefficients,
                       const std::string& device_name, const SweepCallback& progress) {
  if (batch <= 0) throw UsageError("the batch size must be positive");
  const auto& config = gpt->config();
  const int64_t T = set.block_size, windows = set.sequences;
  if (T <= 0 || T > config.block_size)
    throw UsageError("windows of " + std::to_string(T) + " tokens do not fit the GPT's context of " +
                     std::to_string(config.block_size));
  if (windows == 0) throw UsageError(set.identity + " has no window of " + std::to_string(T) + " tokens");
  // The logits are [S, T, V] float32, kept until written: refuse what would not fit rather than
  // fail half-way (GPT-2's vocabulary at T = 1,024 is 206 MB per window).
  const double bytes = 4.0 * static_cast<double>(windows) * static_cast<double>(T) * static_cast<double>(config.vocab_size);
  if (bytes > 4.0 * (1 << 30))
    throw UsageError("the logits of " + std::to_string(windows) + " windows of " + std::to_string(T) + " tokens over " +
                     std::to_string(config.vocab_size) + " tokens would take " +
                     std::to_string(static_cast<int64_t>(bytes / (1 << 20))) +
                     " MiB (at most 4 GiB): ask for fewer windows (--max-sequences)");
  const auto device = nn::parse_device(device_name);
  torch::NoGradGuard no_grad;
  gpt->to(device);
  gpt->eval();
  const auto stream = torch::from_blob(const_cast<int32_t*>(set.stream.data()), {windows * T}, torch::kInt32)
                          .to(torch::kLong)
                          .view({windows, T});
  std::vector<torch::Tensor> logits;
  std::vector<std::pair<std::string, std::vector<torch::Tensor>>> layers;
  std::map<std::string, size_t> where;
  for (int64_t begin = 0; begin < windows; begin += batch) {
    const int64_t end = std::min(windows, begin + batch);
    const auto out = gpt->forward(stream.slice(0, begin, end));  // checks the ids against the vocabulary
    logits.push_back(out.logits.detach().to(torch::kCPU, torch::kFloat32));
    if (with_coefficients)
      for (int64_t layer = 0; layer < static_cast<int64_t>(out.coefficients.size()); ++layer)
        if (out.coefficients[layer].defined())
          collect(layers, where, nn::gpt_mlp_layer_name(config, layer), {out.coefficients[layer]});
    if (progress && !progress(end, windows)) throw Cancelled();
  }
  Predictions p;
  p.logits = torch::cat(logits);
  p.tokens = stream.clone();
  for (auto& [name, parts] : layers) p.coefficients.push_back({name, torch::cat(parts)});
  return p;
}

}  // namespace mumoe::analysis
