// A router layer as the head of an image classifier (nn/image_classifier.h): a CNN with a Soft
// MoE or Softmax Expert Choice head saves and reloads with identical outputs, and the analysis
// session on the images — extraction in whole routing groups, single-expert ablation by both
// methods — gives exactly what this test computes itself: the backbone's features, then the
// head evaluated one routing group at a time in float64, with the expert removed.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "analysis/analysis_session.h"
#include "analysis/vit_block_analysis.h"
#include "data/dataset.h"
#include "data/image_data.h"
#include "io/errors.h"
#include "model/classifier_file.h"
#include "model/classifier_model.h"
#include "model/model_file.h"
#include "temp_dir.h"

using namespace mumoe;

namespace router_image_heads {

constexpr int64_t kImages = 96, kSide = 8, kFeatures = 12, kClasses = 3, kExperts = 4, kGroup = 32;

std::string be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

nn::BackboneConfig small_cnn() {
  nn::BackboneConfig b;
  b.image_size = kSide;
  b.channels1 = 4;
  b.channels2 = 8;
  b.feature_dim = kFeatures;
  return b;
}

nn::MoELayerConfig router_head(nn::RouterKind router) {
  nn::MoELayerConfig c;
  c.router = router;
  c.input_dim = kFeatures;
  c.output_dim = kClasses;
  c.experts = kExperts;
  c.group_size = kGroup;
  c.capacity_factor = 0.75;  // Expert Choice then leaves some images without an expert
  return c;
}

/// The head on `features` one routing group at a time, float64, with `ablated` removed.
nn::MoEOutput head_by_groups(const nn::MoELayer& head, const torch::Tensor& features,
                             const std::vector<int64_t>& ablated = {}) {
  torch::NoGradGuard no_grad;
  auto copy = nn::copy_moe_layer(head, torch::kFloat64, torch::kCPU);
  std::vector<torch::Tensor> outputs, coefficients;
  for (int64_t b = 0; b < features.size(0); b += kGroup) {
    auto out = copy->forward(features.slice(0, b, std::min(features.size(0), b + kGroup)).to(torch::kFloat64), ablated);
    outputs.push_back(out.output);
    coefficients.push_back(out.coefficients);
  }
  nn::MoEOutput all;
  all.output = torch::cat(outputs);
  all.coefficients = torch::cat(coefficients);
  return all;
}

double accuracy_of(const torch::Tensor& predictions, const torch::Tensor& labels) {
  return (predictions == labels).to(torch::kFloat64).mean().item<double>();
}

class RouterImageHead : public ::testing::TestWithParam<nn::RouterKind> {
 protected:
  void SetUp() override {
    torch::manual_seed(7);
    classifier_ = nn::ImageClassifier(small_cnn(), router_head(GetParam()));
    {
      torch::NoGradGuard no_grad;
      for (auto& p : classifier_->named_parameters()) p.value().normal_(0, 0.5);
      classifier_->router_head()->router_weight().mul_(4.0);  // decided routing, as trained routers have
      // Strong experts and a small shared bias, so that removing one expert changes predictions.
      for (auto& p : classifier_->router_head()->named_parameters())
        if (p.key().find("experts_w") != std::string::npos) p.value().mul_(3.0);
    }
    classifier_->eval();
    const auto pixels = torch::randint(0, 256, {kImages, kSide, kSide}, torch::kLong).to(torch::kUInt8);
    {
      torch::NoGradGuard no_grad;
      features_ = classifier_->features(data::to_float_images(pixels.unsqueeze(1)));
    }
    // Labels mostly the model's own predictions, so that removing an expert shows.
    const auto predicted = head_by_groups(classifier_->router_head(), features_).output.argmax(1);
    const auto noisy = torch::rand({kImages}) < 0.2;
    labels_ = torch::where(noisy, torch::randint(kClasses, {kImages}, torch::kLong), predicted);
    std::string img = std::string("\0\0\x08\x03", 4) + be32(kImages) + be32(kSide) + be32(kSide);
    img.append(static_cast<const char*>(pixels.data_ptr()), kImages * kSide * kSide);
    std::string lab = std::string("\0\0\x08\x01", 4) + be32(kImages);
    for (int64_t i = 0; i < kImages; ++i) lab += static_cast<char>(labels_[i].item<int64_t>());
    testkit::write_bytes(dir_.file("t10k-images-idx3-ubyte"), img);
    testkit::write_bytes(dir_.file("t10k-labels-idx1-ubyte"), lab);
    spec_ = "idx:" + dir_.path().string() + ":test";
    model_path_ = dir_.file("model.safetensors");
    model::ClassifierModel::from_image_classifier(classifier_, {"a", "b", "c"}).save(model_path_, {});
  }

  testkit::TempDir dir_;
  nn::ImageClassifier classifier_{nullptr};
  torch::Tensor features_, labels_;
  std::string spec_, model_path_;
};

TEST_P(RouterImageHead, ReloadsWithIdenticalOutputs) {
  const auto file = model::ModelFile::load(model_path_);
  ASSERT_TRUE(file.layer("head").is_router());
  auto model = model::ClassifierModel::load(file);
  ASSERT_TRUE(model.has_backbone());
  ASSERT_TRUE(model.is_router());
  EXPECT_EQ(model.layer_family(), nn::display_name(GetParam()));
  EXPECT_THROW(model.layer(), UsageError);  // the μMoE-only features refuse it by name
  const auto data = data::load_dataset(spec_);
  torch::NoGradGuard no_grad;
  const auto indices = torch::arange(0, 2 * kGroup, torch::kLong);
  const auto loaded = model.forward(data, indices, torch::kCPU).output;
  const auto original = classifier_->forward(data::to_float_images(data.images.index_select(0, indices))).output;
  EXPECT_TRUE(torch::equal(loaded, original));
  // The head's own routing on the backbone's features, group by group.
  EXPECT_TRUE(torch::allclose(loaded.to(torch::kFloat64),
                              head_by_groups(classifier_->router_head(), features_.slice(0, 0, 2 * kGroup)).output,
                              1e-5, 1e-6));
}

TEST_P(RouterImageHead, AnalysisEqualsTheHeadEvaluatedGroupByGroup) {
  analysis::SessionOptions o;
  o.model_path = model_path_;
  o.data_spec = spec_;
  o.cache_path = dir_.file("cache.sqlite");
  o.chunk_size = 40;  // rounded up to whole routing groups (64)
  auto session = analysis::AnalysisSession::open(o);
  session->extract();
  const auto& run = session->run();
  EXPECT_EQ(run.info.chunk_size, 2 * kGroup);
  const auto expected = head_by_groups(classifier_->router_head(), features_);
  const auto predicted = expected.output.argmax(1);
  for (int64_t s = 0; s < kImages; ++s) {
    ASSERT_EQ(run.predictions[s], predicted[s].item<int64_t>()) << "image " << s;
    const auto& rows = run.coefficients[0];
    std::vector<double> dense(kExperts, 0.0);
    for (int64_t k = rows.offsets[s]; k < rows.offsets[s + 1]; ++k) dense[rows.indices[k]] = rows.values[k];
    for (int64_t e = 0; e < kExperts; ++e)
      ASSERT_NEAR(dense[e], expected.coefficients[s][e].item<double>(), 1e-6) << "image " << s << ", expert " << e;
  }
  int64_t changed = 0;
  for (int64_t e = 0; e < kExperts; ++e) {
    const auto without = head_by_groups(classifier_->router_head(), features_, {e}).output.argmax(1);
    for (const auto method : {analysis::AblationMethod::Sparse, analysis::AblationMethod::Naive}) {
      const auto outcome = session->ablate(0, {e}, method, /*recompute=*/true).value;
      EXPECT_DOUBLE_EQ(outcome.after.overall, accuracy_of(without, labels_))
          << "expert " << e << ", " << analysis::to_string(method);
    }
    changed += (without != predicted).sum().item<int64_t>();
  }
  EXPECT_GT(changed, 0) << "the removals must change predictions to test anything";
}

TEST_P(RouterImageHead, BlockAnalysisRefusesARouterHead) {
  // A ViT whose block 0 MLP is a μMoE block, with a router head: the block analysis re-runs only
  // the images an ablation affects, which a router head would route differently from the
  // baseline, so it refuses, naming the head.
  nn::BackboneConfig b;
  b.kind = nn::BackboneKind::VisionTransformer;
  b.image_size = kSide;
  b.feature_dim = kFeatures;
  b.vit.width = kFeatures;
  b.vit.patch_size = 4;
  b.vit.depth = 1;
  b.vit.heads = 2;
  b.vit.mlp_dim = 16;
  b.vit.mumoe_mlps[0] = nn::mumoe_mlp_config(kFeatures, 16, 4, 4, nn::GateActivationKind::Softmax);
  const auto vit_path = dir_.file("vit.safetensors");
  model::ClassifierModel::from_image_classifier(nn::ImageClassifier(b, router_head(GetParam())), {"a", "b", "c"})
      .save(vit_path, {});
  analysis::SessionOptions o;
  o.model_path = vit_path;
  o.data_spec = spec_;
  o.cache_path = dir_.file("cache.sqlite");
  o.layer = "blocks.0.mlp";
  try {
    analysis::VitBlockAnalysis::open(o);
    FAIL() << "a ViT with a router head was analysed block by block";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("μMoE head"), std::string::npos) << e.what();
  }
}

// A malformed file: the router head's expert weights of the wrong shape. Loading names the file
// and the tensor instead of building a wrong model or crashing.
TEST(RouterImageHeadFile, WrongShapedHeadTensorIsAFileError) {
  testkit::TempDir dir;
  nn::ImageClassifier classifier(small_cnn(), router_head(nn::RouterKind::SoftMoE));
  const auto manifest = model::image_classifier_manifest(classifier, {"a", "b", "c"}, {});
  std::vector<io::NamedTensor> tensors;
  for (const auto& p : classifier->named_parameters())
    tensors.push_back({p.key(), p.key() == "head.experts_w1" ? torch::zeros({kExperts, kFeatures + 1, kClasses})
                                                             : p.value()});
  for (const auto& b : classifier->named_buffers()) tensors.push_back({b.key(), b.value()});
  const auto path = dir.file("bad.safetensors");
  model::save_model_file(path, manifest, tensors);
  try {
    model::ClassifierModel::load(model::ModelFile::load(path));
    FAIL() << "a wrong-shaped head tensor was accepted";
  } catch (const FileError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("bad.safetensors"), std::string::npos) << what;
    EXPECT_NE(what.find("experts_w1"), std::string::npos) << what;
  }
}

INSTANTIATE_TEST_SUITE_P(Routers, RouterImageHead,
                         ::testing::Values(nn::RouterKind::SoftMoE, nn::RouterKind::SoftmaxExpertChoice),
                         [](const auto& info) {
                           std::string name = nn::to_string(info.param);
                           for (auto& ch : name)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

}  // namespace router_image_heads
