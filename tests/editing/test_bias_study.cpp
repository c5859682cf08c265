// The bias study against brute force: ā is the mean coefficient vector of the training
// subpopulation, λ's sign follows the under-predicted label, live edits add λ āᵀa to one output
// only; and export: the written file (both layouts) reloads and matches the live edit, an
// existing file or the source is never replaced unless asked, and a failed write leaves the
// destination as it was.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>

#include "biased_features.h"
#include "io/output_files.h"
#include "editing/bias_study.h"
#include "editing/edit_fold.h"
#include "editing/model_export.h"
#include "io/errors.h"
#include "model/classifier_model.h"
#include "reference_math.h"
#include "temp_dir.h"

namespace mumoe::editing {
namespace {

nn::LayerConfig head_config(nn::Factorization f) {
  nn::LayerConfig c;
  c.factorization = f;
  c.input_dim = 8;
  c.output_dim = 2;  // outputs t and u
  c.expert_dims = {6};
  c.cp_rank = 5;
  c.tr_ranks = {2, 3, 3};
  return c;
}

model::ClassifierModel random_head(nn::Factorization f, uint64_t seed) {
  nn::MuMoEBlock block(head_config(f));
  testkit::randomize(block, seed);
  block->eval();
  return model::ClassifierModel::from_layer(block, "head", {"t", "u"}, /*multilabel=*/true);
}

BiasStudy make_study(nn::Factorization f = nn::Factorization::CP) {
  return BiasStudy::create(random_head(f, 3), testkit::biased_features(600, 0.1, 1, "features:train"),
                           testkit::biased_features(400, 1.0, 2, "features:test"));
}

TEST(BiasStudy, MeanCoefficientsAreTheTrainingSubpopulationMean) {
  const auto study = make_study();
  const auto task = make_bias_task("t", "t=1&s=1", "");
  EXPECT_EQ(task.sensitive, "s");
  const auto edit = study.make_edit(task);

  // Brute force: coefficients by the reference block (entmax by bisection, double precision).
  const auto train = testkit::biased_features(600, 0.1, 1, "features:train");
  std::vector<torch::Tensor> coefficients;
  testkit::reference_block(study.model().layer(), train.features.to(torch::kFloat64), coefficients);
  std::vector<double> sum(6, 0.0);
  int64_t members = 0;
  for (int64_t i = 0; i < train.size(); ++i) {
    if (train.attributes[i][0].item<int64_t>() != 1 || train.attributes[i][1].item<int64_t>() != 1) continue;
    ++members;
    for (int64_t n = 0; n < 6; ++n) sum[static_cast<size_t>(n)] += coefficients[0][i][n].item<double>();
  }
  ASSERT_GT(members, 0);
  EXPECT_EQ(edit.support, members);
  ASSERT_EQ(edit.mean_coefficients.size(), 6u);
  for (size_t n = 0; n < 6; ++n) EXPECT_NEAR(edit.mean_coefficients[n], sum[n] / members, 1e-5);
  EXPECT_EQ(edit.output, 0);
  EXPECT_EQ(std::fabs(edit.lambda), 6.0);  // λ = N by default

  const auto blind = study.make_edit(task, {}, /*blind=*/true);
  EXPECT_EQ(blind.mean_coefficients, std::vector<double>(6, 1.0));
  EXPECT_EQ(std::fabs(blind.lambda), 2.5);
  EXPECT_EQ(study.make_edit(task, -0.5).lambda, -0.5);
}

TEST(BiasStudy, LambdaPointsTowardTheUnderPredictedLabel) {
  const auto study = make_study();
  for (const char* predicate : {"t=1&s=1", "t=0&s=1", "t=1&s=0", "t=0&s=0"}) {
    const auto task = make_bias_task("t", predicate, "");
    const auto edit = study.make_edit(task);
    // Brute force over the training split: positives vs positive predictions in the cell.
    const auto& train = study.train();
    double truth = 0, said = 0, count = 0;
    for (int64_t i = 0; i < train.attributes.size(0); ++i) {
      const bool member = train.attributes[i][0].item<int64_t>() == task.subpopulation.value_of("t") &&
                          train.attributes[i][1].item<int64_t>() == task.subpopulation.value_of("s");
      if (!member) continue;
      ++count;
      truth += train.attributes[i][0].item<double>();
      said += train.logits[i][0].item<float>() > 0 ? 1 : 0;
    }
    const bool up = truth != said ? truth > said : task.subpopulation.value_of("t") == 1;
    EXPECT_EQ(edit.lambda > 0, up) << predicate;
  }
}

TEST(BiasStudy, LiveEditAddsLambdaMeanDotCoefficientsToOneOutput) {
  const auto study = make_study(nn::Factorization::TR);
  const auto edit = study.make_edit(make_bias_task("t", "t=1&s=1", ""), 3.0);
  const auto edited = study.edited_test_logits({edit});
  const auto& test = study.test();
  for (int64_t i = 0; i < test.logits.size(0); i += 37) {
    double shift = 0;
    for (int64_t n = 0; n < 6; ++n)
      shift += test.coefficients[i][n].item<double>() * edit.mean_coefficients[static_cast<size_t>(n)];
    EXPECT_NEAR(edited[i][0].item<double>(), test.logits[i][0].item<double>() + 3.0 * shift, 1e-5);
    EXPECT_EQ(edited[i][1].item<float>(), test.logits[i][1].item<float>());
  }
}

TEST(BiasStudy, RejectsMultiClassModelsAndMissingAttributes) {
  nn::MuMoEBlock block(head_config(nn::Factorization::CP));
  auto multiclass = model::ClassifierModel::from_layer(block, "head", {"a", "b"});
  EXPECT_THROW(BiasStudy::create(multiclass, {}, testkit::biased_features(10, 1, 1, "x")), UsageError);
  auto wrong = model::ClassifierModel::from_layer(block, "head", {"t", "Male"}, true);
  EXPECT_THROW(BiasStudy::create(wrong, {}, testkit::biased_features(10, 1, 1, "x")), UsageError);
  const auto study = make_study();
  EXPECT_THROW(study.make_edit(make_bias_task("Male", "Male=1&s=1", "")), UsageError);
  EXPECT_THROW(make_bias_task("t", "t=1", ""), UsageError);          // no sensitive attribute
  EXPECT_THROW(make_bias_task("t", "t=1&s=1&u=0", ""), UsageError);  // ambiguous
}

TEST(BiasStudy, OversamplingRetrainsACopyAndLeavesTheModelAlone) {
  const auto study = make_study();
  const auto before = study.model().layer()->first_layer()->factors()[0].clone();
  OversampleOptions o;
  o.epochs = 2;
  int64_t factor = 0;
  const auto logits = study.oversampled_test_logits(make_bias_task("t", "t=1&s=1", ""), o, &factor);
  EXPECT_EQ(logits.sizes(), study.test().logits.sizes());
  EXPECT_GT(factor, 1);
  EXPECT_TRUE(torch::equal(before, study.model().layer()->first_layer()->factors()[0]));
}

class Export : public ::testing::Test {
 protected:
  void SetUp() override {
    source_path = dir.file("head.safetensors");
    random_head(nn::Factorization::CP, 9).save(source_path, {{"note", "source"}});
    auto file = model::ModelFile::load(source_path);
    auto model = model::ClassifierModel::load(file);
    study.emplace(BiasStudy::create(model, testkit::biased_features(600, 0.1, 1, "features:train"),
                                    testkit::biased_features(400, 1.0, 2, "features:test")));
    task = make_bias_task("t", "t=1&s=1", "");
    edits = {study->make_edit(task), study->make_edit(make_bias_task("u", "u=1&s=0", ""), -2.0)};
    verify_data = study->model().prepare(testkit::biased_features(400, 1.0, 2, "features:test"));
  }
  testkit::TempDir dir;
  std::string source_path;
  std::optional<BiasStudy> study;
  BiasTask task;
  std::vector<LogitEdit> edits;
  data::Dataset verify_data;
};

TEST_F(Export, BothLayoutsReloadAndEqualTheLiveEdit) {
  const auto live = study->edited_test_logits(edits);
  for (auto layout : {ExportLayout::Mumoe, ExportLayout::Reference}) {
    ExportRequest r;
    r.output = dir.file(to_string(layout) + ".safetensors");
    r.layout = layout;
    const auto report = export_edited_model(model::ModelFile::load(source_path), edits, verify_data, r);
    EXPECT_LE(report.max_abs_difference, 1e-5);
    EXPECT_EQ(report.verified_samples, 256);
    EXPECT_EQ(report.layer_after["cp_rank"], 7);
    for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
      EXPECT_EQ(entry.path().string().find(io::kTemporaryInfix), std::string::npos) << entry.path();

    // Independent of the exporter's own check: the ordinary loader + plain forward on all
    // test samples.
    const auto file = model::ModelFile::load(r.output);
    EXPECT_EQ(file.inferred(), layout == ExportLayout::Reference);
    auto reloaded = model::ClassifierModel::load(file);
    torch::NoGradGuard no_grad;
    const auto out = reloaded.layer()->forward(study->test().inputs).output;
    EXPECT_LT((out - live).abs().max().item<double>(), 1e-5) << to_string(layout);
    if (layout == ExportLayout::Mumoe) {
      EXPECT_TRUE(reloaded.multilabel());
      EXPECT_EQ(file.manifest().provenance["edits"].size(), 2u);
      EXPECT_EQ(file.manifest().provenance["note"], "source");
    } else {
      const auto names = file.tensor_names();
      EXPECT_NE(std::find(names.begin(), names.end(), "MuMoE.factors.0"), names.end());
      EXPECT_NE(std::find(names.begin(), names.end(), "projs.0"), names.end());
    }
  }
}

TEST_F(Export, NeverReplacesAFileUnlessAskedAndFailedWritesLeaveItIntact) {
  const auto source_bytes = testkit::read_bytes(source_path);
  ExportRequest r;
  r.output = source_path;
  EXPECT_THROW(export_edited_model(model::ModelFile::load(source_path), edits, verify_data, r), UsageError);
  EXPECT_EQ(testkit::read_bytes(source_path), source_bytes);

  r.output = dir.file("existing.safetensors");
  testkit::write_bytes(r.output, "keep me");
  EXPECT_THROW(export_edited_model(model::ModelFile::load(source_path), edits, verify_data, r), UsageError);
  EXPECT_EQ(testkit::read_bytes(r.output), "keep me");

  // A write that fails half-way (the progress callback stands in for a full disk).
  r.overwrite = true;
  r.layout = ExportLayout::Reference;
  auto fail_half_way = [](uint64_t done, uint64_t total) { return done < total / 2; };
  EXPECT_THROW(export_edited_model(model::ModelFile::load(source_path), edits, verify_data, r, fail_half_way),
               Error);
  EXPECT_EQ(testkit::read_bytes(r.output), "keep me");
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(entry.path().string().find(io::kTemporaryInfix), std::string::npos) << entry.path();

  r.layout = ExportLayout::Mumoe;
  EXPECT_LE(export_edited_model(model::ModelFile::load(source_path), edits, verify_data, r).max_abs_difference, 1e-5);
  EXPECT_NE(testkit::read_bytes(r.output), "keep me");
}

}  // namespace
}  // namespace mumoe::editing
