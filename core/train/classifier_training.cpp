#include "train/classifier_training.h"
#include "train/optimizer_file.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <filesystem>

#include "io/errors.h"
#include "nn/device.h"

namespace mumoe::train {
namespace {

double learning_rate_at(const TrainOptions& o, int64_t global_step, int64_t total_steps) {
  if (o.schedule == "constant") return o.learning_rate;
  const double progress = total_steps > 1 ? static_cast<double>(global_step) / (total_steps - 1) : 1.0;
  return o.learning_rate * 0.5 * (1 + std::cos(M_PI * progress));
}

// Runs the model over `data` in batches of `batch_size`; `use(start, end, logits)` gets each
// batch's logits, on the CPU.
template <typename Use>
void for_each_batch_logits(model::ClassifierModel& model, const data::Dataset& data, int64_t batch_size,
                           const torch::Device& device, const nn::ExpertAblation& ablation, Use use) {
  for (int64_t start = 0; start < data.size(); start += batch_size) {
    const int64_t end = std::min(data.size(), start + batch_size);
    use(start, end, model.forward(data, torch::arange(start, end), device, ablation).output.cpu());
  }
}

// Per target attribute: the share of samples whose thresholded output (logit > 0, i.e.
// probability > 0.5) equals the attribute; `accuracy` is their mean, `mean_loss` the mean BCE.
Evaluation evaluate_multilabel(model::ClassifierModel& model, const data::Dataset& data, int64_t batch_size,
                               const torch::Device& device, const nn::ExpertAblation& ablation) {
  if (!data.multilabel()) throw UsageError(data.identity + " has no multi-label targets for this model");
  const int64_t targets = data.targets.size(1);
  auto correct = torch::zeros({targets}, torch::kLong);
  double loss_sum = 0;
  for_each_batch_logits(model, data, batch_size, device, ablation,
                        [&](int64_t start, int64_t end, const torch::Tensor& logits) {
    const auto truth = data.targets.slice(0, start, end);
    loss_sum += torch::binary_cross_entropy_with_logits(logits, truth.to(logits.scalar_type()), {}, {},
                                                        at::Reduction::Sum)
                    .item<double>();
    correct += ((logits > 0).to(torch::kLong) == truth).to(torch::kLong).sum(0);
  });
  Evaluation e;
  e.samples = data.size();
  for (int64_t t = 0; t < targets; ++t) {
    e.per_class_count.push_back(e.samples);
    e.per_class_accuracy.push_back(e.samples ? correct[t].item<double>() / e.samples : 0.0);
  }
  e.accuracy = e.samples ? correct.sum().item<double>() / (e.samples * targets) : 0;
  e.mean_loss = e.samples ? loss_sum / (e.samples * targets) : 0;
  return e;
}

}  // namespace

TrainResult train_classifier(model::ClassifierModel& model, const data::Dataset& data, const TrainOptions& o,
                             const TrainCallback& progress, const CheckpointWriter& write_checkpoint,
                             const std::function<int64_t(const std::string&)>& read_checkpoint) {
  auto& module = model.module();
  if (o.epochs <= 0 || o.batch_size <= 0 || o.learning_rate <= 0)
    throw UsageError("epochs, batch size and learning rate must be positive");
  if (o.schedule != "cosine" && o.schedule != "constant")
    throw UsageError("unknown schedule '" + o.schedule + "' (expected cosine or constant)");
  if (data.size() == 0) throw UsageError("the training data (" + data.identity + ") is empty");
  model.check_compatible(data);
  const auto device = nn::parse_device(o.device);
  torch::manual_seed(o.seed);
  module.to(device);

  torch::optim::AdamW optimizer(module.parameters(),
                                torch::optim::AdamWOptions(o.learning_rate).weight_decay(o.weight_decay));
  TrainResult result;
  const std::string optimizer_path = optimizer_state_path(o.checkpoint_path);
  if (!o.checkpoint_path.empty()) io::require_replaceable(optimizer_path);
  if (o.resume && !o.checkpoint_path.empty() && std::filesystem::exists(o.checkpoint_path)) {
    result.first_epoch = read_checkpoint(o.checkpoint_path);
    module.to(device);
    if (std::filesystem::exists(optimizer_path)) torch::load(optimizer, optimizer_path);
  }

  const int64_t n = data.size();
  const int64_t steps_per_epoch = (n + o.batch_size - 1) / o.batch_size;
  const int64_t total_steps = steps_per_epoch * o.epochs;
  const auto start = std::chrono::steady_clock::now();
  int64_t steps_done_here = 0;

  for (int64_t epoch = result.first_epoch; epoch < o.epochs; ++epoch) {
    module.train();
    // Seeded per epoch: shuffling and dropout do not depend on whether the run was resumed.
    torch::manual_seed(o.seed * 1000003 + static_cast<uint64_t>(epoch));
    const auto order = torch::randperm(n, torch::kLong);
    double loss_sum = 0;
    for (int64_t step = 0; step < steps_per_epoch; ++step) {
      const auto idx = order.slice(0, step * o.batch_size, std::min(n, (step + 1) * o.batch_size));
      // Multi-class: softmax cross-entropy on the class label; multi-label: one binary
      // cross-entropy per target attribute, averaged.
      const auto labels = (model.multilabel() ? data.targets : data.labels).index_select(0, idx).to(device);
      for (auto& group : optimizer.param_groups())
        static_cast<torch::optim::AdamWOptions&>(group.options())
            .lr(learning_rate_at(o, epoch * steps_per_epoch + step, total_steps));
      optimizer.zero_grad();
      const auto forward = model.forward(data, idx, device);
      const auto& output = forward.output;
      auto loss = model.multilabel()
                      ? torch::binary_cross_entropy_with_logits(output, labels.to(output.scalar_type()))
                      : torch::cross_entropy_loss(output, labels);
      // A router layer's load-balancing loss (only Softmax Token Choice has a non-zero one: the
      // study's importance loss, App. A; the other routers balance by construction).
      if (forward.aux_loss.defined()) loss = loss + o.aux_loss_weight * forward.aux_loss;
      loss.backward();
      optimizer.step();
      loss_sum += loss.item<double>();
      ++steps_done_here;

      if (progress) {
        TrainProgress p;
        p.epoch = epoch;
        p.epochs = o.epochs;
        p.step = step + 1;
        p.steps_per_epoch = steps_per_epoch;
        p.loss = loss_sum / (step + 1);
        p.elapsed_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const int64_t remaining = total_steps - (epoch * steps_per_epoch + step + 1);
        p.eta_seconds = p.elapsed_seconds / steps_done_here * remaining;
        if (!progress(p)) throw Cancelled();
      }
    }
    result.epoch_losses.push_back(loss_sum / steps_per_epoch);
    if (!o.checkpoint_path.empty()) {
      write_checkpoint(o.checkpoint_path, epoch + 1);
      save_optimizer_state(optimizer, optimizer_path);
    }
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  module.eval();
  return result;
}

TrainResult train_classifier(nn::ImageClassifier& classifier, const data::LabelledImages& data,
                             const TrainOptions& options, const TrainCallback& progress,
                             const CheckpointWriter& write_checkpoint,
                             const std::function<int64_t(const std::string&)>& read_checkpoint) {
  auto model = model::ClassifierModel::from_image_classifier(classifier, data.class_names);
  return train_classifier(model, data::Dataset::from(data), options, progress, write_checkpoint, read_checkpoint);
}

Evaluation evaluate_classifier(nn::ImageClassifier& classifier, const data::LabelledImages& data,
                               int64_t batch_size, const std::string& device, const nn::ExpertAblation& ablation) {
  auto model = model::ClassifierModel::from_image_classifier(classifier, data.class_names);
  return evaluate_classifier(model, data::Dataset::from(data), batch_size, device, ablation);
}

Evaluation evaluate_classifier(model::ClassifierModel& model, const data::Dataset& data, int64_t batch_size,
                               const std::string& device_name, const nn::ExpertAblation& ablation) {
  const auto device = nn::parse_device(device_name);
  model.module().to(device);
  model.module().eval();
  torch::NoGradGuard no_grad;
  // A router layer's whole routing groups, for both tasks: the paths that evaluate the model
  // elsewhere (extraction, the bias study) route in these groups too.
  batch_size = model.aligned_batch(batch_size);
  if (model.multilabel()) return evaluate_multilabel(model, data, batch_size, device, ablation);
  const int64_t classes = static_cast<int64_t>(data.class_names.size());
  auto correct = torch::zeros({classes}, torch::kLong);
  auto count = torch::zeros({classes}, torch::kLong);
  double loss_sum = 0;
  for_each_batch_logits(model, data, batch_size, device, ablation,
                        [&](int64_t start, int64_t end, const torch::Tensor& logits) {
    const auto labels = data.labels.slice(0, start, end);
    loss_sum += torch::cross_entropy_loss(logits, labels, {}, at::Reduction::Sum).item<double>();
    const auto hit = (logits.argmax(1) == labels).to(torch::kLong);
    correct.index_add_(0, labels, hit);
    count.index_add_(0, labels, torch::ones_like(labels));
  });
  Evaluation e;
  e.samples = data.size();
  e.accuracy = e.samples ? correct.sum().item<double>() / e.samples : 0;
  e.mean_loss = e.samples ? loss_sum / e.samples : 0;
  for (int64_t c = 0; c < classes; ++c) {
    const auto n = count[c].item<int64_t>();
    e.per_class_count.push_back(n);
    e.per_class_accuracy.push_back(n ? correct[c].item<double>() / n : 0.0);
  }
  return e;
}

}  // namespace mumoe::train
