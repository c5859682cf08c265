// The expert-conditional rewrite on router layers (edit_fold.h): a multi-label Soft MoE, Softmax
// Token Choice or Softmax Expert Choice head's bias study has coefficients equal to the head
// evaluated group by group in this test, ā equal to their brute-force mean over the training
// subpopulation, and its exported model — the edits folded into the experts' output biases —
// reloads and gives the live edit's logits on every test sample (and an unedited output
// unchanged). The reference and source layouts, which describe μMoE layers, are refused.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>

#include "biased_features.h"
#include "editing/bias_study.h"
#include "editing/model_export.h"
#include "io/errors.h"
#include "model/classifier_model.h"
#include "model/model_file.h"
#include "temp_dir.h"

namespace mumoe::editing {
namespace router_rewrite {

constexpr int64_t kExperts = 6, kGroup = 40;

model::ClassifierModel router_head(nn::RouterKind router, uint64_t seed) {
  nn::MoELayerConfig c;
  c.router = router;
  c.input_dim = 8;
  c.output_dim = 2;  // outputs t and u
  c.experts = kExperts;
  c.hidden_dim = router == nn::RouterKind::SoftMoE ? 5 : 0;  // GELU experts (bias b2) and linear ones (b1)
  c.group_size = kGroup;
  c.capacity_factor = 1.0;
  torch::manual_seed(seed);
  nn::MoELayer head(c);
  {
    torch::NoGradGuard no_grad;
    head->router_weight().mul_(3.0);
  }
  head->eval();
  return model::ClassifierModel::from_router_layer(head, "head", {"t", "u"}, /*multilabel=*/true);
}

/// The head's coefficients on `x`, one routing group at a time, float64.
torch::Tensor coefficients_by_groups(const nn::MoELayer& head, const torch::Tensor& x) {
  torch::NoGradGuard no_grad;
  auto copy = nn::copy_moe_layer(head, torch::kFloat64, torch::kCPU);
  std::vector<torch::Tensor> parts;
  for (int64_t b = 0; b < x.size(0); b += kGroup)
    parts.push_back(copy->forward(x.slice(0, b, std::min(x.size(0), b + kGroup)).to(torch::kFloat64)).coefficients);
  return torch::cat(parts);
}

class RouterRewrite : public ::testing::TestWithParam<nn::RouterKind> {
 protected:
  void SetUp() override {
    source_path_ = dir_.file("head.safetensors");
    router_head(GetParam(), 4).save(source_path_, {{"note", "source"}});
    study_.emplace(BiasStudy::create(model::ClassifierModel::load(model::ModelFile::load(source_path_)),
                                     testkit::biased_features(600, 0.1, 1, "features:train"),
                                     testkit::biased_features(400, 1.0, 2, "features:test")));
  }
  testkit::TempDir dir_;
  std::string source_path_;
  std::optional<BiasStudy> study_;
};

TEST_P(RouterRewrite, MeanCoefficientsAreTheTrainingSubpopulationMean) {
  const auto edit = study_->make_edit(make_bias_task("t", "t=1&s=1", ""));
  const auto train = testkit::biased_features(600, 0.1, 1, "features:train");
  const auto a = coefficients_by_groups(study_->model().router_layer(), train.features);
  EXPECT_LT((study_->train().coefficients.to(torch::kFloat64) - a).abs().max().item<double>(), 1e-5);
  std::vector<double> sum(kExperts, 0.0);
  int64_t members = 0;
  for (int64_t i = 0; i < train.size(); ++i) {
    if (train.attributes[i][0].item<int64_t>() != 1 || train.attributes[i][1].item<int64_t>() != 1) continue;
    ++members;
    for (int64_t n = 0; n < kExperts; ++n) sum[static_cast<size_t>(n)] += a[i][n].item<double>();
  }
  ASSERT_GT(members, 0);
  EXPECT_EQ(edit.support, members);
  ASSERT_EQ(edit.mean_coefficients.size(), static_cast<size_t>(kExperts));
  for (size_t n = 0; n < sum.size(); ++n) EXPECT_NEAR(edit.mean_coefficients[n], sum[n] / members, 1e-5);
}

TEST_P(RouterRewrite, ExportFoldsIntoTheExpertBiasesAndReloadsAsTheLiveEdit) {
  const std::vector<LogitEdit> edits = {study_->make_edit(make_bias_task("t", "t=1&s=1", ""), 4.0)};
  const auto live = study_->edited_test_logits(edits);
  const auto& test = study_->test();
  // The live edit itself against its formula: y_t + λ āᵀa, y_u unchanged.
  const auto a = test.coefficients.to(torch::kFloat64);
  const auto shift = a.matmul(torch::tensor(edits[0].mean_coefficients, torch::kFloat64)) * 4.0;
  EXPECT_LT((live.select(1, 0).to(torch::kFloat64) - test.logits.select(1, 0).to(torch::kFloat64) - shift)
                .abs()
                .max()
                .item<double>(),
            1e-5);
  ASSERT_GT(shift.abs().max().item<double>(), 0.1) << "the edit must move the logits to test anything";

  const auto verify_data = study_->model().prepare(testkit::biased_features(400, 1.0, 2, "features:test"));
  ExportRequest r;
  r.output = dir_.file("edited.safetensors");
  r.layout = ExportLayout::Mumoe;
  const auto report = export_edited_model(model::ModelFile::load(source_path_), edits, verify_data, r);
  EXPECT_LE(report.max_abs_difference, 1e-5);
  EXPECT_EQ(report.layer_after, report.layer_before);  // only bias values change

  // The ordinary loader and the plain forward, all test samples at once (whole groups).
  const auto file = model::ModelFile::load(r.output);
  ASSERT_TRUE(file.layer("head").is_router());
  auto reloaded = model::ClassifierModel::load(file);
  EXPECT_TRUE(reloaded.multilabel());
  torch::NoGradGuard no_grad;
  const auto out = reloaded.forward_layer(test.inputs).output;
  EXPECT_LT((out - live).abs().max().item<double>(), 1e-5);
  EXPECT_LT((out.select(1, 1) - test.logits.select(1, 1)).abs().max().item<double>(), 1e-5);

  for (auto layout : {ExportLayout::Reference, ExportLayout::Source}) {
    r.output = dir_.file(to_string(layout) + ".safetensors");
    r.layout = layout;
    EXPECT_THROW(export_edited_model(model::ModelFile::load(source_path_), edits, verify_data, r), UsageError);
    EXPECT_FALSE(std::filesystem::exists(r.output));
  }
}

TEST_P(RouterRewrite, OversampledRetrainingBaselineRetrainsARouterLayer) {
  OversampleOptions o;
  o.epochs = 2;
  int64_t factor = 0;
  const auto logits = study_->oversampled_test_logits(make_bias_task("t", "t=1&s=1", ""), o, &factor);
  EXPECT_EQ(logits.sizes(), study_->test().logits.sizes());
  EXPECT_GT(factor, 1);
  EXPECT_TRUE(torch::isfinite(logits).all().item<bool>());
  EXPECT_FALSE(torch::equal(logits, study_->test().logits)) << "a retrained layer gives other logits";
}

INSTANTIATE_TEST_SUITE_P(Routers, RouterRewrite,
                         ::testing::Values(nn::RouterKind::SoftMoE, nn::RouterKind::SoftmaxTokenChoice,
                                           nn::RouterKind::SoftmaxExpertChoice),
                         [](const auto& info) {
                           std::string name = nn::to_string(info.param);
                           for (auto& ch : name)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

}  // namespace router_rewrite
}  // namespace mumoe::editing
