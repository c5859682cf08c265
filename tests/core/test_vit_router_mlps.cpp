// The router study's MoE layers as the MLPs of the project's ViT (backbone_config.h
// router_mlps): a classifier with a Soft MoE MLP in block 0 and a Softmax Expert Choice MLP in
// block 1 saves and reloads with identical outputs; each block's MLP is its MoE layer on the
// block's own stream (x + MoE(norm2(x))); and block ablation through VitBlockAnalysis gives the
// same predictions with the sparse method (combine weights zeroed, only affected images re-run
// from the block) as with the naive oracle (the expert's output weights zeroed, every image
// through the model's own forward), expert by expert and for a set.
#include <gtest/gtest.h>
#include <algorithm>
#include <torch/torch.h>

#include "analysis/layer_comparison.h"
#include "analysis/vit_block_analysis.h"
#include "data/dataset.h"
#include "io/errors.h"
#include "model/classifier_file.h"
#include "model/classifier_model.h"
#include "model/model_file.h"
#include "temp_dir.h"

using namespace mumoe;

namespace {

constexpr int64_t kImages = 40, kWidth = 16, kTokens = 5;  // 14 px, patch 7: 4 patches + class token

/// A ViT on 14 px grey images with one block per router, `routers[i]` as block i's MLP
/// (4 GELU experts of width 6) and a CP μMoE head over 3 classes.
std::pair<nn::BackboneConfig, nn::LayerConfig> vit_config(const std::vector<nn::RouterKind>& routers) {
  nn::BackboneConfig b;
  b.kind = nn::BackboneKind::VisionTransformer;
  b.in_channels = 1;
  b.image_size = 14;
  b.feature_dim = kWidth;
  b.vit.width = kWidth;
  b.vit.patch_size = 7;
  b.vit.depth = static_cast<int64_t>(routers.size());
  b.vit.heads = 2;
  b.vit.mlp_dim = 32;
  for (size_t i = 0; i < routers.size(); ++i)
    b.vit.router_mlps[static_cast<int64_t>(i)] = nn::router_mlp_config(routers[i], kWidth, 4, 6, kTokens);
  nn::LayerConfig head;
  head.input_dim = kWidth;
  head.output_dim = 3;
  head.expert_dims = {4};
  head.cp_rank = 4;
  return {b, head};
}

model::ClassifierModel tiny_vit(uint64_t seed, const std::vector<nn::RouterKind>& routers = {nn::RouterKind::SoftMoE,
                                                                                      nn::RouterKind::SoftmaxExpertChoice}) {
  auto [b, head] = vit_config(routers);
  head.gate_activation = nn::GateActivationKind::Softmax;
  torch::manual_seed(seed);
  nn::ImageClassifier classifier(b, head);
  {
    torch::NoGradGuard no_grad;
    // Random gates and routers (the head's gates start at zero), so that experts matter.
    for (auto& p : classifier->named_parameters()) p.value().normal_(0, 0.5);
    // Strong experts, so that removing one moves the stream enough to change predictions.
    for (auto& p : classifier->named_parameters())
      if (p.key().find("experts_w") != std::string::npos) p.value().mul_(3.0);
  }
  classifier->eval();
  return model::ClassifierModel::from_image_classifier(classifier, {"a", "b", "c"});
}

data::Dataset tiny_images(uint64_t seed) {
  torch::manual_seed(seed);
  data::LabelledImages images;
  images.images = torch::randint(0, 256, {kImages, 1, 14, 14}, torch::kLong).to(torch::kUInt8);
  images.labels = torch::randint(0, 3, {kImages}, torch::kLong);
  images.class_names = {"a", "b", "c"};
  auto data = data::Dataset::from(std::move(images));
  data.identity = "tiny images";
  return data;
}

TEST(VitRouterMlps, SaveReloadAndEachBlockIsItsMoELayer) {
  testkit::TempDir dir;
  auto model = tiny_vit(1);
  const auto data = tiny_images(2);
  const auto path = dir.file("vit.safetensors");
  model.save(path, {});
  const auto file = model::ModelFile::load(path);
  ASSERT_EQ(file.manifest().layers.size(), 3u);
  EXPECT_TRUE(file.layer("blocks.0.mlp").is_router());
  EXPECT_EQ(file.layer("blocks.1.mlp").router->router, nn::RouterKind::SoftmaxExpertChoice);
  auto reloaded = model::ClassifierModel::load(file);
  // The block analysis's configuration of a router MLP (what `compare` reports) is the file's.
  for (const int64_t block : {0, 1}) {
    const auto name = "blocks." + std::to_string(block) + ".mlp";
    EXPECT_EQ(model::layer_config_json(analysis::VitBlockAnalysis(reloaded, data, block).manifest_layer()),
              model::layer_config_json(file.layer(name)))
        << name;
  }
  torch::NoGradGuard no_grad;
  const auto indices = torch::arange(kImages);
  const auto before = model.forward(data, indices, torch::kCPU).output;
  EXPECT_TRUE(torch::equal(before, reloaded.forward(data, indices, torch::kCPU).output));

  // Block by block: x + MoE(norm2(x + attention)), the MoE layer evaluated alone on that stream.
  auto* tokens = model.image_classifier()->backbone()->tokens();
  ASSERT_NE(tokens, nullptr);
  auto x = tokens->embed(model.backbone_inputs(data, indices, torch::kCPU));
  for (int64_t block = 0; block < 2; ++block) {
    const auto attended = tokens->attention_residual(x, block);
    auto moe = tokens->router_mlp(block);
    ASSERT_FALSE(moe.is_empty());
    auto norm2 = model.image_classifier()->backbone()->named_modules()["blocks." + std::to_string(block) + ".norm2"];
    const auto normed = norm2->as<torch::nn::LayerNorm>()->forward(attended);
    // Groups are one image's tokens: the layer image by image equals it on the whole batch.
    std::vector<torch::Tensor> per_image;
    for (int64_t i = 0; i < kImages; ++i) per_image.push_back(moe->forward(normed.slice(0, i, i + 1)).output);
    const auto expected = attended + torch::cat(per_image);
    const auto next = tokens->run_block(x, block);
    EXPECT_LT((next - expected).abs().max().item<double>(), 1e-4 * expected.abs().max().item<double>())
        << "block " << block;
    x = next;
  }
  const auto logits = model.image_classifier()->head()->forward(tokens->pool(x)).output;
  EXPECT_LT((logits - before).abs().max().item<double>(), 1e-4 * before.abs().max().item<double>());
}

TEST(VitRouterMlps, BlockAblationSparseEqualsTheOracle) {
  auto model = tiny_vit(3);
  const auto data = tiny_images(4);
  for (const int64_t block : {0, 1}) {
    analysis::VitBlockAnalysis analysis(model, data, block);
    EXPECT_EQ(analysis.experts(), 4);
    int64_t changed = 0;
    for (const std::vector<int64_t>& experts : {std::vector<int64_t>{0}, {1}, {2}, {3}, {0, 2}}) {
      const auto sparse = analysis.predictions_after(experts, analysis::AblationMethod::Sparse);
      const auto naive = analysis.predictions_after(experts, analysis::AblationMethod::Naive);
      EXPECT_EQ(sparse, naive) << "block " << block << ", experts " << experts.front();
      for (int64_t s = 0; s < kImages; ++s) changed += sparse[s] != analysis.predictions_before()[s];
    }
    EXPECT_GT(changed, 0) << "removing experts of block " << block << " must change some prediction";
  }
}

TEST(VitRouterMlps, LastBlockSweepFromOneRoutingPassEqualsTheOracle) {
  // Every router as the last block's MLP of a class-token ViT: the sparse sweep removes each
  // expert from the class token's output of one routing pass per image batch; the oracle zeroes
  // the expert's weights and runs every image through the model's own forward, once per expert.
  // (Seeds 7 and 8 give a model whose predictions each router's experts change: some seeds give
  // one that predicts a single class whatever the experts do.)
  for (auto router : {nn::RouterKind::SoftmaxTokenChoice, nn::RouterKind::SinkhornTokenChoice,
                      nn::RouterKind::SoftmaxExpertChoice, nn::RouterKind::SinkhornExpertChoice,
                      nn::RouterKind::SparsityExpertChoice, nn::RouterKind::SoftMoE}) {
    SCOPED_TRACE(nn::to_string(router));
    auto model = tiny_vit(7, {nn::RouterKind::SoftMoE, router});
    const auto data = tiny_images(8);
    int64_t changed = 0;
    // Batches of 3 images (40 = 13 · 3 + 1): the sweep's steps, the last one a single image.
    analysis::VitBlockOptions options;
    options.batch_size = 3;
    analysis::VitBlockAnalysis analysis(model, data, 1, options);
    ASSERT_TRUE(analysis.class_tokens_only());
    const auto sparse = analysis.sweep(analysis::AblationMethod::Sparse);
    const auto naive = analysis.sweep(analysis::AblationMethod::Naive);
    ASSERT_EQ(sparse.experts.size(), 4u);
    ASSERT_EQ(naive.experts.size(), 4u);
    for (size_t e = 0; e < 4; ++e) {
      EXPECT_EQ(sparse.experts[e].after.correct, naive.experts[e].after.correct) << "expert " << e;
      EXPECT_EQ(sparse.experts[e].changed_predictions, naive.experts[e].changed_predictions) << "expert " << e;
      changed += sparse.experts[e].changed_predictions;
      // Only images whose class token the expert reaches can change (the oracle shares none of
      // the sparse method's steps, so this checks affected_samples' claim).
      const auto affected = analysis.affected_samples({static_cast<int64_t>(e)});
      const auto after = analysis.predictions_after({static_cast<int64_t>(e)}, analysis::AblationMethod::Naive);
      EXPECT_EQ(analysis.predictions_after({static_cast<int64_t>(e)}, analysis::AblationMethod::Sparse), after)
          << "expert " << e;
      for (int64_t s = 0; s < kImages; ++s) {
        if (after[s] != analysis.predictions_before()[s]) {
          EXPECT_TRUE(std::binary_search(affected.begin(), affected.end(), s)) << "image " << s << ", expert " << e;
        }
      }
    }
    EXPECT_EQ(analysis.predictions_after({1, 3}, analysis::AblationMethod::Sparse),
              analysis.predictions_after({1, 3}, analysis::AblationMethod::Naive));
    // A repeated expert is refused (the oracle would restore it from its own zeroed copy).
    EXPECT_THROW(analysis.predictions_after({1, 1}, analysis::AblationMethod::Naive), UsageError);
    // A cancelled sweep stops.
    EXPECT_THROW(analysis.sweep(analysis::AblationMethod::Sparse, [](int64_t, int64_t) { return false; }),
                 Cancelled);
    EXPECT_GT(changed, 0) << "removing experts must change some prediction";
  }
  // A router whose groups are not one image: re-running some images would route them otherwise.
  auto [b, head] = vit_config({nn::RouterKind::SoftMoE, nn::RouterKind::SoftmaxExpertChoice});
  b.vit.router_mlps[1].group_size = 0;
  nn::ImageClassifier whole_batch(b, head);
  whole_batch->eval();
  const auto model = model::ClassifierModel::from_image_classifier(whole_batch, {"a", "b", "c"});
  try {
    analysis::VitBlockAnalysis refused(model, tiny_images(8), 1);
    ADD_FAILURE() << "a router routing whole batches was analysed";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("routes groups of a whole batch"), std::string::npos) << e.what();
  }
}

TEST(VitRouterMlps, TrainingAddsTheImportanceLossOfTokenChoiceMlps) {
  const auto [b, head] = vit_config({nn::RouterKind::SoftmaxTokenChoice});
  auto model = model::ClassifierModel::from_image_classifier(nn::ImageClassifier(b, head), {"a", "b", "c"});
  model.module().train();
  const auto data = tiny_images(5);
  const auto out = model.forward(data, torch::arange(8), torch::kCPU);
  ASSERT_TRUE(out.aux_loss.defined());
  // The block's own MoE layer on the same stream gives the same importance loss.
  auto* tokens = model.image_classifier()->backbone()->tokens();
  const auto x = tokens->embed(model.backbone_inputs(data, torch::arange(8), torch::kCPU));
  const auto attended = tokens->attention_residual(x, 0);
  auto norm2 = model.image_classifier()->backbone()->named_modules()["blocks.0.norm2"];
  const auto expected = tokens->router_mlp(0)->forward(norm2->as<torch::nn::LayerNorm>()->forward(attended)).aux_loss;
  EXPECT_NEAR(out.aux_loss.item<double>(), expected.item<double>(), 1e-6);
  EXPECT_GT(out.aux_loss.item<double>(), 0);
}

TEST(VitRouterMlps, ParameterMatchedExpertsAndTheirLimit) {
  // Dense 128 → 512 → 128: 131,712 parameters.
  const int64_t dense = 2 * 128 * 512 + 512 + 128;
  for (const int64_t n : {4, 16, 64}) {
    const auto h = nn::parameter_matched_expert_hidden(128, 512, n);
    const auto c = nn::router_mlp_config(nn::RouterKind::SoftMoE, 128, n, h, 17);
    EXPECT_LE(c.parameter_count(), dense) << n;
    EXPECT_GT(nn::router_mlp_config(nn::RouterKind::SoftMoE, 128, n, h + 1, 17).parameter_count(), dense) << n;
  }
  EXPECT_THROW(nn::parameter_matched_expert_hidden(128, 512, 512), UsageError);
}

// TR μMoE MLPs (`mumoe train --mlp-variant tr`), the other μMoE kind beside CP.
TEST(VitTrMlps, ParameterMatchedRingRanksCountTheModulesParameters) {
  const int64_t dense = 2 * 64 * 256 + 256 + 64;  // the experiment's ViT MLP: 33,088
  auto numel = [](const nn::LayerConfig& c) {
    int64_t n = 0;
    for (const auto& p : nn::MuMoEBlock(c)->parameters()) n += p.numel();
    return n;
  };
  for (const int64_t n : {16, 64}) {
    const auto ranks = nn::parameter_matched_tr_ranks(64, 256, n);
    ASSERT_EQ(ranks.size(), 3u);
    EXPECT_EQ(ranks[0], 4);
    EXPECT_EQ(ranks[1], 4);
    EXPECT_LE(numel(nn::mumoe_tr_mlp_config(64, 256, n, ranks)), dense) << n;
    EXPECT_GT(numel(nn::mumoe_tr_mlp_config(64, 256, n, {4, 4, ranks[2] + 1})), dense) << n;
  }
  EXPECT_THROW(nn::parameter_matched_tr_ranks(8, 8, 4096), UsageError);
}

TEST(VitTrMlps, ReloadAndBlockAblationSparseEqualsTheOracle) {
  testkit::TempDir dir;
  nn::BackboneConfig b = vit_config({}).first;
  b.vit.depth = 2;
  for (int64_t i = 0; i < 2; ++i)
    b.vit.mumoe_mlps[i] = nn::mumoe_tr_mlp_config(kWidth, 32, 4, {2, 3, 4}, nn::GateActivationKind::Softmax);
  nn::LayerConfig head = vit_config({}).second;
  head.gate_activation = nn::GateActivationKind::Softmax;
  torch::manual_seed(9);
  nn::ImageClassifier classifier(b, head);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : classifier->named_parameters()) p.value().normal_(0, 0.5);
  }
  classifier->eval();
  const auto path = dir.file("vit-tr.safetensors");
  model::save_image_classifier(path, classifier,
                               model::image_classifier_manifest(classifier, {"a", "b", "c"}, nlohmann::json::object()));
  auto model = model::ClassifierModel::load(model::ModelFile::load(path));
  const auto data = tiny_images(6);
  {
    torch::NoGradGuard no_grad;
    const auto reloaded = model.forward(data, torch::arange(kImages), torch::kCPU).output;
    const auto original = model::ClassifierModel::from_image_classifier(classifier, {"a", "b", "c"})
                              .forward(data, torch::arange(kImages), torch::kCPU)
                              .output;
    EXPECT_TRUE(torch::equal(reloaded, original));
  }
  for (const int64_t block : {0, 1}) {
    analysis::VitBlockAnalysis analysis(model, data, block);
    int64_t changed = 0;
    for (const std::vector<int64_t>& experts : {std::vector<int64_t>{0}, {1}, {2}, {3}, {1, 3}}) {
      const auto sparse = analysis.predictions_after(experts, analysis::AblationMethod::Sparse);
      const auto naive = analysis.predictions_after(experts, analysis::AblationMethod::Naive);
      EXPECT_EQ(sparse, naive) << "block " << block << ", experts " << experts.front();
      for (int64_t s = 0; s < kImages; ++s) changed += sparse[s] != analysis.predictions_before()[s];
    }
    EXPECT_GT(changed, 0) << "removing experts of block " << block << " must change some prediction";
  }
}

}  // namespace
