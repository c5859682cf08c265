// The image classifier: model file round trip, training that learns a separable toy task,
// exact resume from a checkpoint, and cancel.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "io/errors.h"
#include "model/classifier_file.h"
#include "train/classifier_training.h"
#include "temp_dir.h"

using namespace mumoe;
using testkit::TempDir;

namespace {

nn::ImageClassifier small_classifier(uint64_t seed) {
  torch::manual_seed(seed);
  nn::BackboneConfig b;
  b.image_size = 8;
  b.channels1 = 4;
  b.channels2 = 8;
  b.feature_dim = 16;
  nn::LayerConfig head;
  head.input_dim = 16;
  head.output_dim = 2;
  head.expert_dims = {8};
  head.cp_rank = 6;
  return nn::ImageClassifier(b, head);
}

// Class 1 images are bright in the top half, class 0 in the bottom half.
data::LabelledImages toy_data(int64_t n) {
  torch::manual_seed(123);
  data::LabelledImages d;
  d.labels = torch::randint(0, 2, {n}, torch::kLong);
  auto images = torch::randint(0, 60, {n, 1, 8, 8}, torch::kLong);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t top = d.labels[i].item<int64_t>() == 1 ? 0 : 4;
    images[i].slice(1, top, top + 4) += 180;
  }
  d.images = images.to(torch::kUInt8);
  d.class_names = {"bottom", "top"};
  d.identity = "toy";
  return d;
}

TEST(ImageClassifier, ModelFileRoundTripIsExact) {
  TempDir dir;
  auto c = small_classifier(1);
  c->eval();
  const auto path = dir.file("c.safetensors");
  model::save_image_classifier(path, c, model::image_classifier_manifest(c, {"a", "b"}, {{"k", 1}}));
  const auto file = model::ModelFile::load(path);
  EXPECT_EQ(file.manifest().architecture, "image-classifier");
  EXPECT_EQ(file.single_layer().name, "head");  // the head is an ordinary μMoE layer too
  auto loaded = model::load_image_classifier(file);
  auto x = torch::rand({5, 1, 8, 8});
  torch::NoGradGuard g;
  EXPECT_TRUE(torch::equal(loaded->forward(x).output, c->forward(x).output));
  // The head alone, built as a layer, gives the same logits from the features.
  auto head = file.build_layer("head");
  EXPECT_TRUE(torch::allclose(head->forward(c->features(x)).output, c->forward(x).output));
}

TEST(ImageClassifier, LearnsAToyTaskAndReportsPerClassAccuracy) {
  auto c = small_classifier(2);
  const auto data = toy_data(512);
  train::TrainOptions o;
  o.epochs = 4;
  o.batch_size = 32;
  o.learning_rate = 5e-3;
  const auto before = train::evaluate_classifier(c, data);
  const auto result = train::train_classifier(c, data, o, {}, {}, {});
  const auto after = train::evaluate_classifier(c, data);
  EXPECT_LT(result.epoch_losses.back(), result.epoch_losses.front());
  EXPECT_GT(after.accuracy, 0.95) << "before training: " << before.accuracy;
  ASSERT_EQ(after.per_class_count.size(), 2u);
  EXPECT_EQ(after.per_class_count[0] + after.per_class_count[1], 512);
  // Overall accuracy is the count-weighted mean of the per-class accuracies.
  EXPECT_NEAR(after.accuracy,
              (after.per_class_accuracy[0] * after.per_class_count[0] + after.per_class_accuracy[1] * after.per_class_count[1]) / 512,
              1e-12);
}

TEST(ImageClassifier, ResumedTrainingEqualsUninterruptedTraining) {
  torch::set_num_threads(1);  // bit-for-bit comparison needs a fixed reduction order
  TempDir dir;
  const auto data = toy_data(256);
  train::TrainOptions o;
  o.epochs = 3;
  o.batch_size = 32;
  o.checkpoint_path = dir.file("ckpt.safetensors");

  auto make_io = [&](nn::ImageClassifier& c) {
    auto write = [&c](const std::string& path, int64_t done) {
      model::save_image_classifier(path, c, model::image_classifier_manifest(c, {}, {{"completed_epochs", done}}));
    };
    auto read = [&c](const std::string& path) {
      const auto f = model::ModelFile::load(path);
      f.load_into(*c, [](const std::string& k) { return k; });
      return f.manifest().provenance.at("completed_epochs").get<int64_t>();
    };
    return std::make_pair(train::CheckpointWriter(write), std::function<int64_t(const std::string&)>(read));
  };

  auto full = small_classifier(3);
  auto [w1, r1] = make_io(full);
  train::train_classifier(full, data, o, {}, w1, r1);

  // Interrupted after the first epoch (the callback cancels at the start of epoch 2) ...
  auto part = small_classifier(3);
  auto [w2, r2] = make_io(part);
  EXPECT_THROW(train::train_classifier(part, data, o, [](const train::TrainProgress& p) { return p.epoch < 1; }, w2, r2),
               Cancelled);
  // ... and resumed by a new process-like object from the checkpoint.
  auto resumed = small_classifier(99);
  auto [w3, r3] = make_io(resumed);
  o.resume = true;
  const auto result = train::train_classifier(resumed, data, o, {}, w3, r3);
  EXPECT_EQ(result.first_epoch, 1);
  auto x = toy_data(16).images;
  torch::NoGradGuard g;
  full->eval();
  resumed->eval();
  EXPECT_TRUE(torch::equal(full->forward(data::to_float_images(x)).output,
                           resumed->forward(data::to_float_images(x)).output));
}

}  // namespace
