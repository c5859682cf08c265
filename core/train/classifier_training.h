// Training and evaluation of image classifiers, with progress callbacks that can cancel,
// periodic checkpoints and exact resume.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "model/classifier_model.h"
#include "nn/image_classifier.h"

namespace mumoe::train {

struct TrainOptions {
  int64_t epochs = 10;
  int64_t batch_size = 128;
  /// Weight of a router layer's auxiliary load-balancing loss (nn::MoEOutput::aux_loss).
  double aux_loss_weight = 0.01;
  double learning_rate = 2e-3;
  double weight_decay = 1e-4;  ///< AdamW's decoupled weight decay (0: plain Adam)
  std::string schedule = "cosine";  ///< "cosine" (to 0 over all steps) or "constant"
  uint64_t seed = 0;
  std::string device = "cpu";
  /// After every epoch the model and optimizer are saved here (model file + ".optim.pt");
  /// "" disables checkpoints.
  std::string checkpoint_path;
  /// Continue from checkpoint_path if it exists.
  bool resume = false;
};

struct TrainProgress {
  int64_t epoch = 0;  ///< 0-based
  int64_t epochs = 0;
  int64_t step = 0;  ///< within the epoch
  int64_t steps_per_epoch = 0;
  double loss = 0;          ///< running mean of this epoch
  double elapsed_seconds = 0;
  double eta_seconds = 0;
};

/// Return false to stop training; train_classifier then throws mumoe::Cancelled after saving
/// nothing new (the last completed epoch's checkpoint stays valid).
using TrainCallback = std::function<bool(const TrainProgress&)>;

struct TrainResult {
  std::vector<double> epoch_losses;  ///< for the epochs run in this call
  int64_t first_epoch = 0;           ///< > 0 when resumed
  double seconds = 0;
};

/// Called after each epoch to write a checkpoint (model file) to `path`.
using CheckpointWriter = std::function<void(const std::string& path, int64_t completed_epochs)>;

/// Trains with softmax cross-entropy (multi-label models: binary cross-entropy per target). Batches are shuffled with a generator seeded by
/// seed + epoch, so a resumed run sees the same batches as an uninterrupted one.
/// Works for both kinds of ClassifierModel: a CNN with its head on images, or a bare μMoE layer
/// on a feature file.
TrainResult train_classifier(model::ClassifierModel& model, const data::Dataset& data, const TrainOptions& options,
                             const TrainCallback& progress, const CheckpointWriter& write_checkpoint,
                             const std::function<int64_t(const std::string&)>& read_checkpoint);
/// The same for an image classifier on image data.
TrainResult train_classifier(nn::ImageClassifier& classifier, const data::LabelledImages& data,
                             const TrainOptions& options, const TrainCallback& progress,
                             const CheckpointWriter& write_checkpoint,
                             const std::function<int64_t(const std::string&)>& read_checkpoint);

/// For a multi-label model the "classes" are its target attributes: per_class_accuracy[t] is the
/// share of samples whose output t (logit > 0) equals attribute t, accuracy their mean and
/// mean_loss the mean binary cross-entropy.
struct Evaluation {
  int64_t samples = 0;
  double accuracy = 0;
  double mean_loss = 0;
  std::vector<double> per_class_accuracy;
  std::vector<int64_t> per_class_count;
};

/// Accuracy overall and per class (eval mode, no gradients), optionally with experts of the
/// head ablated.
Evaluation evaluate_classifier(model::ClassifierModel& model, const data::Dataset& data, int64_t batch_size = 500,
                               const std::string& device = "cpu", const nn::ExpertAblation& ablation = {});
Evaluation evaluate_classifier(nn::ImageClassifier& classifier, const data::LabelledImages& data,
                               int64_t batch_size = 500, const std::string& device = "cpu",
                               const nn::ExpertAblation& ablation = {});

}  // namespace mumoe::train
