// The torch-free bias façade (editing/bias_session.h) on a synthetic multi-label head over
// feature files: the plain evaluation is the study's fairness, edits evaluate as the study's
// live edits, the edit stack (push/undo/redo) is saved on every change and restored when the
// model is reopened (keyed by its content hash), and the export folds the applied edits and
// verifies them to 1e-5.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>

#include "biased_features.h"
#include "editing/bias_session.h"
#include "editing/bias_study.h"
#include "io/errors.h"
#include "model/classifier_model.h"
#include "model/model_file.h"
#include "reference_math.h"
#include "temp_dir.h"

namespace mumoe::editing {
namespace {

class BiasSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nn::LayerConfig c;
    c.input_dim = 8;
    c.output_dim = 2;
    c.expert_dims = {6};
    c.cp_rank = 5;
    nn::MuMoEBlock block(c);
    testkit::randomize(block, 3);
    block->eval();
    model_path = dir.file("head.safetensors");
    model::ClassifierModel::from_layer(block, "head", {"t", "u"}, /*multilabel=*/true).save(model_path, nlohmann::json::object());
    testkit::write_feature_file(dir.file("train.safetensors"), testkit::biased_features(600, 0.1, 1, "train"));
    testkit::write_feature_file(dir.file("test.safetensors"), testkit::biased_features(400, 1.0, 2, "test"));
    options.model_path = model_path;
    options.train_spec = "features:" + dir.file("train.safetensors");
    options.test_spec = "features:" + dir.file("test.safetensors");
    options.session_db = dir.file("edits.sqlite");
  }
  testkit::TempDir dir;
  std::string model_path;
  BiasSessionOptions options;
};

TEST_F(BiasSessionTest, EvaluateEqualsTheStudy) {
  int64_t last_done = 0, last_total = 0;
  auto session = BiasSession::open(options, [&](int64_t done, int64_t total) {
    last_done = done;
    last_total = total;
    return true;
  });
  EXPECT_EQ(last_done, 1000);
  EXPECT_EQ(last_total, 1000);
  EXPECT_EQ(session->target_names(), (std::vector<std::string>{"t", "u"}));
  EXPECT_EQ(session->attribute_names(), (std::vector<std::string>{"t", "s", "u"}));
  EXPECT_EQ(session->expert_count(), 6);
  EXPECT_EQ(probe_model_kind(model_path), ModelKind::MultiLabel);

  // The same study, built directly.
  const auto file = model::ModelFile::load(model_path);
  const auto study = BiasStudy::create(model::ClassifierModel::load(file), data::load_dataset(options.train_spec),
                                       data::load_dataset(options.test_spec));
  const auto task = make_bias_task("t", "t=1&s=1", "");
  const auto plain = session->evaluate(task, {});
  const auto expected = study.fairness(task);
  EXPECT_EQ(to_json(plain.report), to_json(expected));
  EXPECT_EQ(plain.name, "model");
  EXPECT_FALSE(plain.mrs.has_value());  // measured alone: no reference, no MRS
  EXPECT_EQ(plain.per_target_accuracy, study.per_target_accuracy(study.test().logits));

  // The session's arrays come from the analysis cache (the layer evaluated in float64), the
  // direct study's from a float32 pass: ā agrees to float32 rounding.
  const auto edit = session->propose(task, 4.0);
  const auto direct_edit = study.make_edit(task, 4.0);
  ASSERT_EQ(edit.mean_coefficients.size(), direct_edit.mean_coefficients.size());
  for (size_t n = 0; n < edit.mean_coefficients.size(); ++n)
    EXPECT_NEAR(edit.mean_coefficients[n], direct_edit.mean_coefficients[n], 1e-6);
  EXPECT_EQ(edit.support, direct_edit.support);
  EXPECT_EQ(edit.lambda, direct_edit.lambda);
  const auto edited = session->evaluate(task, {edit});
  EXPECT_EQ(to_json(edited.report), to_json(study.fairness(task, {edit})));
  EXPECT_EQ(edited.name, "model + 1 edit");
  EXPECT_EQ(std::fabs(session->propose(task).lambda), 6.0);

  // The preview (what the λ slider and `mumoe rewrite` show): before = the applied edits (none
  // yet), after = + the edit at the given λ, its MRS against before and naming it.
  const auto preview = session->preview(task, 4.0);
  EXPECT_EQ(preview.proposed_lambda, session->propose(task).lambda);
  EXPECT_EQ(preview.edit.lambda, 4.0);
  EXPECT_EQ(to_json(preview.before.report), to_json(expected));
  EXPECT_EQ(to_json(preview.after.report), to_json(edited.report));
  ASSERT_TRUE(preview.after.mrs.has_value());
  EXPECT_DOUBLE_EQ(*preview.after.mrs, mrs(expected, edited.report));
  EXPECT_EQ(preview.after.mrs_reference, "model");

  EXPECT_THROW(session->evaluate(make_bias_task("nope", "nope=1&s=1", ""), {}), UsageError);
  EXPECT_THROW(session->undo(), UsageError);

  // With an applied edit, the next preview is measured against the model with it.
  session->push(edit);
  const auto stacked = session->preview(task, -2.0);
  EXPECT_EQ(stacked.before.name, "model + 1 edit");
  EXPECT_EQ(to_json(stacked.before.report), to_json(edited.report));
  EXPECT_EQ(to_json(stacked.after.report), to_json(session->evaluate(task, {edit, stacked.edit}).report));
  EXPECT_DOUBLE_EQ(*stacked.after.mrs, mrs(edited.report, stacked.after.report));
  EXPECT_EQ(stacked.after.mrs_reference, "model + 1 edit");
  const auto blind = session->blind_threshold(task);
  EXPECT_EQ(blind.mrs_reference, "model + 1 edit");
  EXPECT_EQ(to_json(blind.report), to_json(session->evaluate(task, {edit, session->propose(task, {}, true)}).report));
}

// The default task is the lowest-accuracy non-empty cell over (output, non-output attribute):
// checked against a brute-force loop over the test samples of a directly built study, for the
// plain model and with an edit that moves which cell is worst.
TEST_F(BiasSessionTest, WorstCellTaskIsTheLowestAccuracyCell) {
  auto session = BiasSession::open(options);
  const auto file = model::ModelFile::load(model_path);
  const auto study = BiasStudy::create(model::ClassifierModel::load(file), data::load_dataset(options.train_spec),
                                       data::load_dataset(options.test_spec));
  const auto attributes = study.test().attributes;  // [S, 3]: t, s, u
  auto bruteForce = [&](const torch::Tensor& logits) {
    std::string worst;
    double worst_accuracy = 2;
    const std::vector<std::pair<std::string, int>> outputs{{"t", 0}, {"u", 2}};  // output name, its attribute column
    for (size_t o = 0; o < outputs.size(); ++o) {
      for (int t : {1, 0}) {
        for (int v : {1, 0}) {  // s is the only attribute that is not an output
          int64_t count = 0, correct = 0;
          for (int64_t i = 0; i < logits.size(0); ++i) {
            if (attributes[i][outputs[o].second].item<int64_t>() != t || attributes[i][1].item<int64_t>() != v) continue;
            ++count;
            correct += (logits[i][static_cast<int64_t>(o)].item<float>() > 0) == (t == 1) ? 1 : 0;
          }
          if (count == 0) continue;
          const double accuracy = static_cast<double>(correct) / count;
          if (accuracy < worst_accuracy) {
            worst_accuracy = accuracy;
            worst = outputs[o].first + "=" + std::to_string(t) + "&s=" + std::to_string(v);
          }
        }
      }
    }
    return worst;
  };

  const auto plain = session->worst_cell_task();
  EXPECT_EQ(plain.subpopulation.text(), bruteForce(study.test().logits));
  EXPECT_EQ(plain.sensitive, "s");
  EXPECT_EQ(plain.target, plain.subpopulation.text().substr(0, 1));

  // Push the worst cell's output hard toward its label: that cell improves and another becomes
  // the worst.
  const auto edit = session->propose(plain, plain.subpopulation.text().find("=1&") != std::string::npos ? 12.0 : -12.0);
  const auto edited = session->worst_cell_task({edit});
  const auto expected = bruteForce(study.edited_test_logits({edit}));
  EXPECT_EQ(edited.subpopulation.text(), expected);
  EXPECT_NE(edited.subpopulation.text(), plain.subpopulation.text());
}

TEST_F(BiasSessionTest, CancelledOpenThrows) {
  EXPECT_THROW(BiasSession::open(options, [](int64_t, int64_t) { return false; }), Cancelled);
}

TEST_F(BiasSessionTest, UndoRedoPersistAcrossReopen) {
  const auto task = make_bias_task("t", "t=1&s=1", "");
  {
    auto session = BiasSession::open(options);
    session->push(session->propose(task, 2.0));
    session->push(session->propose(make_bias_task("u", "u=1&s=0", ""), -1.0));
    session->undo();
    EXPECT_EQ(session->stack().applied_count(), 1u);
    EXPECT_EQ(session->stack().all().size(), 2u);
  }
  {
    auto session = BiasSession::open(options);
    EXPECT_EQ(session->stack().applied_count(), 1u);
    ASSERT_EQ(session->stack().all().size(), 2u);
    EXPECT_EQ(session->stack().all()[0].lambda, 2.0);
    session->redo();
  }
  {
    auto session = BiasSession::open(options);
    EXPECT_EQ(session->stack().applied_count(), 2u);
    session->undo();
    session->undo();
    EXPECT_FALSE(session->stack().can_undo());
  }
  auto session = BiasSession::open(options);
  EXPECT_EQ(session->stack().applied_count(), 0u);
  EXPECT_TRUE(session->stack().can_redo());
  // Another model (other bytes) starts with an empty stack in the same database.
  auto other = options;
  other.model_path = dir.file("copy.safetensors");
  nn::LayerConfig c;
  c.input_dim = 8;
  c.output_dim = 2;
  c.expert_dims = {6};
  c.cp_rank = 5;
  nn::MuMoEBlock block(c);
  testkit::randomize(block, 4);
  model::ClassifierModel::from_layer(block, "head", {"t", "u"}, true).save(other.model_path, nlohmann::json::object());
  EXPECT_EQ(BiasSession::open(other)->stack().all().size(), 0u);
}

TEST_F(BiasSessionTest, ExportFoldsTheAppliedEditsAndVerifies) {
  auto session = BiasSession::open(options);
  const auto task = make_bias_task("t", "t=1&s=1", "");
  session->push(session->propose(task));
  session->push(session->propose(task, -3.0));
  session->undo();  // only the first edit is applied
  ExportRequest r;
  r.output = dir.file("edited.safetensors");
  const auto report = session->export_model(r);
  EXPECT_EQ(report.edits, 1);
  EXPECT_LE(report.max_abs_difference, 1e-5);
  EXPECT_EQ(report.verified_samples, 256);
  EXPECT_EQ(report.layout, ExportLayout::Mumoe);

  // The exported model, reopened unedited, measures what the live edit measured.
  auto reopened_options = options;
  reopened_options.model_path = r.output;
  auto reopened = BiasSession::open(reopened_options);
  const auto live = session->evaluate(task, session->stack().applied());
  const auto folded = reopened->evaluate(task, {});
  EXPECT_EQ(to_json(live.report), to_json(folded.report));

  // Never over the source without being asked.
  r.output = model_path;
  EXPECT_THROW(session->export_model(r), UsageError);
  r.output = dir.file("edited.safetensors");
  EXPECT_THROW(session->export_model(r), UsageError);  // exists
  r.overwrite = true;
  r.layout = ExportLayout::Reference;
  EXPECT_LE(session->export_model(r).max_abs_difference, 1e-5);
}

}  // namespace
}  // namespace mumoe::editing
