// The sparse ablation sweep against the naive oracle (N full passes with W_n := 0), prediction
// for prediction, on several layer kinds — including a two-layer block, where the ablated layer
// is followed by GELU and a second μMoE layer — and extraction's CSR/dense conversions.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>

#include "analysis/analysis_session.h"
#include "analysis/counterfactual_ablation.h"
#include "analysis/exact_layer.h"
#include "analysis/run_data.h"
#include "analysis/tensor_records.h"
#include "io/errors.h"
#include "analysis_fixture.h"
#include "model/classifier_model.h"
#include "model/model_file.h"
#include "temp_dir.h"

using namespace mumoe;
using namespace mumoe::analysis;

namespace {

// A session on `fixture`'s head and features, its cache in `dir`, extracted.
std::unique_ptr<AnalysisSession> extracted_session(const testkit::TempDir& dir, const testkit::AnalysisFixture& fixture,
                                                   int64_t chunk_size = SessionOptions{}.chunk_size) {
  SessionOptions o;
  o.model_path = fixture.model_path;
  o.data_spec = "features:" + fixture.features_path;
  o.cache_path = dir.file("cache.sqlite");
  o.chunk_size = chunk_size;
  auto session = AnalysisSession::open(o);
  session->extract();
  return session;
}

TEST(TensorRecords, SparseRowsRoundTripThroughDenseRows) {
  auto a = torch::tensor({{0.0, 0.5, 0.5, 0.0}, {0.0, 0.0, 0.0, 0.0}, {1.0, 0.0, 0.0, 0.0}}, torch::kFloat64);
  const auto rows = to_sparse_rows(a);
  EXPECT_EQ(rows.offsets, (std::vector<int64_t>{0, 2, 2, 3}));
  EXPECT_EQ(rows.indices, (std::vector<int32_t>{1, 2, 0}));
  EXPECT_EQ(rows.values, (std::vector<double>{0.5, 0.5, 1.0}));
  const auto picked = dense_rows(rows, torch::tensor({2, 0, 1, 0}, torch::kLong), 4);
  EXPECT_TRUE(torch::equal(picked, torch::stack({a[2], a[0], a[1], a[0]})));
}

// A chunk record's predictions are each row's torch::argmax: the first of equal maxima, a NaN
// counting as the largest (the record computes them in a loop of its own).
TEST(TensorRecords, PredictionsAreTorchsArgmaxWithTiesAndNaNs) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  auto scores = torch::tensor({{1.0, 3.0, 3.0, 2.0}, {5.0, 5.0, 5.0, 5.0}, {1.0, nan, 9.0, nan}, {-inf, -inf, -inf, -2.0},
                               {nan, 1.0, 2.0, 3.0}, {0.0, -0.0, 0.0, -1.0}},
                              torch::kFloat64);
  scores = torch::cat({scores, torch::randn({50, 4}, torch::kFloat64)});
  const auto rows = scores.size(0);
  const auto record = make_chunk_record(0, 0, torch::Tensor(), torch::zeros({rows}, torch::kLong), scores,
                                        {torch::rand({rows, 3})}, torch::Tensor());
  const auto want = scores.argmax(1);
  ASSERT_EQ(record.predictions.size(), static_cast<size_t>(rows));
  for (int64_t b = 0; b < rows; ++b) EXPECT_EQ(record.predictions[b], want[b].item<int64_t>()) << "row " << b;
  // float32 scores too (widened first)
  const auto narrow = make_chunk_record(0, 0, torch::Tensor(), torch::zeros({rows}, torch::kLong),
                                        scores.to(torch::kFloat32), {torch::rand({rows, 3})}, torch::Tensor());
  for (int64_t b = 0; b < rows; ++b)
    EXPECT_EQ(narrow.predictions[b], scores.to(torch::kFloat32).argmax(1)[b].item<int64_t>()) << "row " << b;
}

// Columns from rows, against a brute-force loop over (expert, sample): full rows (a softmax
// gate's, transposed in tiles) and sparse ones (scattered), with sizes that are not multiples of
// the tile.
TEST(RunDataColumns, MatchABruteForceLoopForFullAndSparseRows) {
  for (const bool full : {true, false}) {
    const int64_t samples = 75, experts = 37;
    cache::SparseRows rows;
    rows.offsets.push_back(0);
    for (int64_t s = 0; s < samples; ++s) {
      for (int32_t n = 0; n < experts; ++n)
        if (full || (s * 7 + n * 3) % 5 < 2) {
          rows.indices.push_back(n);
          rows.values.push_back(1.0 + s * 0.01 + n);
        }
      rows.offsets.push_back(static_cast<int64_t>(rows.indices.size()));
    }
    const auto columns = to_columns(rows, experts);
    ASSERT_EQ(columns.offsets.size(), static_cast<size_t>(experts + 1));
    std::vector<int64_t> want_samples;
    std::vector<double> want_values;
    for (int64_t n = 0; n < experts; ++n) {
      EXPECT_EQ(columns.offsets[n], static_cast<int64_t>(want_samples.size())) << "expert " << n;
      for (int64_t s = 0; s < samples; ++s)
        for (int64_t k = rows.offsets[s]; k < rows.offsets[s + 1]; ++k)
          if (rows.indices[k] == n) {
            want_samples.push_back(s);
            want_values.push_back(rows.values[k]);
          }
    }
    EXPECT_EQ(columns.offsets.back(), static_cast<int64_t>(want_samples.size()));
    EXPECT_EQ(columns.samples, want_samples) << (full ? "full" : "sparse");
    EXPECT_EQ(columns.values, want_values) << (full ? "full" : "sparse");
  }
}

struct Case {
  const char* name;
  nn::Factorization factorization;
  std::vector<int64_t> experts;
  int64_t second_dim;
  nn::GateActivationKind activation;
  bool input_layer_norm = false;
  int64_t classes = 5;
  int64_t samples = 400;
};

class SparseEqualsNaive : public ::testing::TestWithParam<Case> {};

TEST_P(SparseEqualsNaive, PredictionForPrediction) {
  const auto& c = GetParam();
  testkit::TempDir dir;
  auto config = testkit::head_config(c.factorization, c.experts, c.classes, c.second_dim);
  config.gate_activation = c.activation;
  config.input_layer_norm = c.input_layer_norm;
  const auto fixture = testkit::write_analysis_fixture(dir.path().string(), config, c.samples, 3);
  auto session = extracted_session(dir, fixture, 64);  // several chunks, a short last one
  const auto& run = session->run();

  const auto file = model::ModelFile::load(fixture.model_path);
  const auto model = model::ClassifierModel::load(file);
  CounterfactualAblation engine(model.layer(), run, c.classes);

  int64_t changed_total = 0;
  for (int64_t mode = 0; mode < static_cast<int64_t>(c.experts.size()); ++mode) {
    // The stored predictions are what a full pass of the layer gives.
    for (int64_t n = 0; n < c.experts[mode]; ++n) {
      const auto sparse = engine.predictions_after(mode, {n}, AblationMethod::Sparse);
      const auto naive = engine.predictions_after(mode, {n}, AblationMethod::Naive);
      ASSERT_EQ(sparse, naive) << c.name << ": mode " << mode << ", expert " << n;
      for (size_t s = 0; s < sparse.size(); ++s) changed_total += sparse[s] != run.predictions[s];
    }
    const auto sweep_sparse = engine.sweep(mode, AblationMethod::Sparse);
    const auto sweep_naive = engine.sweep(mode, AblationMethod::Naive);
    ASSERT_EQ(sweep_sparse.experts.size(), static_cast<size_t>(c.experts[mode]));
    for (size_t n = 0; n < sweep_sparse.experts.size(); ++n) {
      EXPECT_EQ(sweep_sparse.experts[n].after.correct, sweep_naive.experts[n].after.correct) << "expert " << n;
      EXPECT_EQ(sweep_sparse.experts[n].changed_predictions, sweep_naive.experts[n].changed_predictions);
      EXPECT_EQ(sweep_sparse.experts[n].drop, sweep_naive.experts[n].drop);
    }
    EXPECT_EQ(sweep_sparse.experts_with_effect, sweep_naive.experts_with_effect);
    // A set of experts removed together (three, so that samples using one, two or all three of
    // them meet: the affected samples are their union).
    const std::vector<int64_t> set = {0, c.experts[mode] / 2, c.experts[mode] - 1};
    EXPECT_EQ(engine.predictions_after(mode, set, AblationMethod::Sparse),
              engine.predictions_after(mode, set, AblationMethod::Naive));
  }
  // The comparison means something only if ablations change predictions.
  EXPECT_GT(changed_total, 0) << c.name;
  // The naive method restored the weights it zeroed: the engine still agrees with a fresh one.
  CounterfactualAblation fresh(model.layer(), run, c.classes);
  for (int64_t n = 0; n < c.experts[0]; ++n)
    EXPECT_EQ(engine.predictions_after(0, {n}, AblationMethod::Sparse),
              fresh.predictions_after(0, {n}, AblationMethod::Sparse));
}

INSTANTIATE_TEST_SUITE_P(
    Layers, SparseEqualsNaive,
    ::testing::Values(Case{"CP", nn::Factorization::CP, {24}, 0, nn::GateActivationKind::Entmax15},
                      Case{"TR", nn::Factorization::TR, {16}, 0, nn::GateActivationKind::Entmax15},
                      Case{"CP hierarchy 2", nn::Factorization::CP, {8, 4}, 0, nn::GateActivationKind::Entmax15},
                      Case{"CP two-layer block", nn::Factorization::CP, {16}, 5, nn::GateActivationKind::Entmax15},
                      Case{"TR two-layer block", nn::Factorization::TR, {12}, 5, nn::GateActivationKind::Entmax15},
                      Case{"CP softmax", nn::Factorization::CP, {12}, 0, nn::GateActivationKind::Softmax},
                      // The rank-one path (single layers) in every shape it takes: a context on
                      // both sides of the removed mode (TR), every expert active, an input norm.
                      Case{"TR hierarchy 3", nn::Factorization::TR, {4, 5, 3}, 0, nn::GateActivationKind::Entmax15},
                      Case{"TR softmax", nn::Factorization::TR, {10}, 0, nn::GateActivationKind::Softmax},
                      Case{"CP hierarchy 3 softmax", nn::Factorization::CP, {4, 3, 5}, 0,
                           nn::GateActivationKind::Softmax},
                      Case{"CP input LayerNorm", nn::Factorization::CP, {16}, 0, nn::GateActivationKind::Entmax15, true},
                      // The CP pair kernel's class blocks: 11 classes are one block of eight and
                      // a padded tail; 2,500 samples span three contexts of the sweep.
                      Case{"CP 11 classes softmax", nn::Factorization::CP, {12}, 0, nn::GateActivationKind::Softmax,
                           false, 11, 2500},
                      Case{"TR 11 classes", nn::Factorization::TR, {9}, 0, nn::GateActivationKind::Entmax15, false, 11,
                           2500}),
    [](const auto& info) {
      std::string name = info.param.name;
      for (auto& ch : name)
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return name;
    });

// Two classes with the same output row tie exactly in every sample, so every prediction between
// them rests on argmax's first-index rule: the rank-one path must notice each near-tie and give
// the oracle's answer, expert for expert.
TEST(SparseAblation, ExactlyTiedClassScoresGiveTheOraclesPredictions) {
  testkit::TempDir dir;
  const auto fixture =
      testkit::write_analysis_fixture(dir.path().string(), testkit::head_config(nn::Factorization::CP, {16}, 4), 300, 5);
  {
    const auto file = model::ModelFile::load(fixture.model_path);
    auto model = model::ClassifierModel::load(file);
    torch::NoGradGuard no_grad;
    auto out = model.layer()->first_layer()->factors().back();  // U_O [classes, R]
    out[1].copy_(out[0]);
    model.save(fixture.model_path, {{"created_by", "tie test"}});
  }
  auto session = extracted_session(dir, fixture);
  const auto& run = session->run();
  int64_t tied = 0;
  for (int64_t s = 0; s < run.samples(); ++s) tied += run.scores[s * 4] == run.scores[s * 4 + 1];
  ASSERT_EQ(tied, run.samples());
  const auto model = model::ClassifierModel::load(model::ModelFile::load(fixture.model_path));
  CounterfactualAblation engine(model.layer(), run, 4);
  const auto sparse = engine.sweep(0, AblationMethod::Sparse), naive = engine.sweep(0, AblationMethod::Naive);
  int64_t changed = 0;
  for (int64_t n = 0; n < 16; ++n) {
    EXPECT_EQ(engine.predictions_after(0, {n}, AblationMethod::Sparse),
              engine.predictions_after(0, {n}, AblationMethod::Naive)) << "expert " << n;
    EXPECT_EQ(sparse.experts[n].after.correct, naive.experts[n].after.correct) << "expert " << n;
    EXPECT_EQ(sparse.experts[n].changed_predictions, naive.experts[n].changed_predictions) << "expert " << n;
    changed += naive.experts[n].changed_predictions;
  }
  EXPECT_GT(changed, 0);
}

// A softmax CP head stores the float32 arithmetic's scores (ExactLayer::certified_scores): each
// within its bound of the exact value, not ~1e-16 of it. Classes 0 and 1 here differ by ~3e-7 of
// their scores — below what float32 resolves — so many corrections land within that bound of a
// tie, and the rank-one path must count them as ties (or use the float64 scores of such rows) to
// give the oracle's predictions, expert for expert.
TEST(SparseAblation, ClassesCloserThanFloat32ResolvesGiveTheOraclesPredictions) {
  testkit::TempDir dir;
  auto config = testkit::head_config(nn::Factorization::CP, {16}, 4);
  config.gate_activation = nn::GateActivationKind::Softmax;
  const auto fixture = testkit::write_analysis_fixture(dir.path().string(), config, 600, 8);
  {
    const auto file = model::ModelFile::load(fixture.model_path);
    auto model = model::ClassifierModel::load(file);
    torch::NoGradGuard no_grad;
    auto out = model.layer()->first_layer()->factors().back();  // U_O [classes, R]
    out[1].copy_(out[0] * (1 + 3e-7));
    model.save(fixture.model_path, {{"created_by", "float32 near-tie test"}});
  }
  auto session = extracted_session(dir, fixture, 100);
  const auto& run = session->run();
  // The stored scores are float32 values (widened), except in rows close to a tie.
  int64_t float32_rows = 0;
  for (int64_t s = 0; s < run.samples(); ++s) {
    bool all = true;
    for (int64_t o = 0; o < 4; ++o) {
      const double v = run.scores[s * 4 + o];
      all = all && static_cast<double>(static_cast<float>(v)) == v;
    }
    float32_rows += all;
  }
  EXPECT_GT(float32_rows, run.samples() / 2);
  const auto model = model::ClassifierModel::load(model::ModelFile::load(fixture.model_path));
  CounterfactualAblation engine(model.layer(), run, 4);
  // The stored predictions are the float64 arithmetic's (the oracle's with nothing removed).
  ExactLayer exact(model.layer(), torch::kCPU);
  const auto inputs = torch::from_blob(const_cast<float*>(run.inputs.data()), {run.samples(), 12}, torch::kFloat32);
  const auto oracle_before = exact.forward(inputs).output.argmax(1);
  for (int64_t s = 0; s < run.samples(); ++s) ASSERT_EQ(run.predictions[s], oracle_before[s].item<int64_t>()) << s;
  const auto sparse = engine.sweep(0, AblationMethod::Sparse), naive = engine.sweep(0, AblationMethod::Naive);
  int64_t changed = 0, between_the_two = 0;
  for (int64_t n = 0; n < 16; ++n) {
    const auto after = engine.predictions_after(0, {n}, AblationMethod::Naive);
    EXPECT_EQ(engine.predictions_after(0, {n}, AblationMethod::Sparse), after) << "expert " << n;
    EXPECT_EQ(sparse.experts[n].after.correct, naive.experts[n].after.correct) << "expert " << n;
    EXPECT_EQ(sparse.experts[n].changed_predictions, naive.experts[n].changed_predictions) << "expert " << n;
    changed += naive.experts[n].changed_predictions;
    for (int64_t s = 0; s < run.samples(); ++s)
      between_the_two += after[s] != run.predictions[s] && after[s] + run.predictions[s] == 1;
  }
  EXPECT_EQ(engine.predictions_after(0, {1, 5, 9}, AblationMethod::Sparse),
            engine.predictions_after(0, {1, 5, 9}, AblationMethod::Naive));
  // A run without the masses made at load (built otherwise) reads them from its coefficients.
  auto bare = run;
  ASSERT_EQ(bare.coefficient_mass.size(), static_cast<size_t>(run.samples()));
  bare.coefficient_mass.clear();
  CounterfactualAblation from_coefficients(model.layer(), bare, 4);
  for (const int64_t n : {0, 7, 15})
    EXPECT_EQ(from_coefficients.predictions_after(0, {n}, AblationMethod::Sparse),
              engine.predictions_after(0, {n}, AblationMethod::Naive)) << "expert " << n;
  EXPECT_GT(changed, 0);
  EXPECT_GT(between_the_two, 0) << "the test needs removals that move a prediction between the two close classes";
}

TEST(SparseAblation, TouchesOnlySamplesThatUseTheExpert) {
  testkit::TempDir dir;
  const auto fixture =
      testkit::write_analysis_fixture(dir.path().string(), testkit::head_config(nn::Factorization::CP, {32}, 5), 300, 9);
  auto session = extracted_session(dir, fixture);
  const auto& run = session->run();
  // entmax is sparse here, so most samples cannot be affected by any single expert.
  int64_t support_total = 0;
  for (int64_t n = 0; n < 32; ++n) support_total += run.columns[0].support(n);
  EXPECT_LT(support_total, 300 * 32 / 2);
  const auto answer = session->ablate(0, {3});
  EXPECT_EQ(answer.value.affected_samples, run.columns[0].support(3));
  EXPECT_LE(answer.value.changed_predictions, answer.value.affected_samples);
}

TEST(SparseAblation, AnExpertListedTwiceIsRefusedAndChangesNothing) {
  // The naive oracle zeroes and restores one slice per listed expert: a repeated expert would be
  // restored from its own zeroed copy and stay removed for every later answer.
  testkit::TempDir dir;
  const auto fixture =
      testkit::write_analysis_fixture(dir.path().string(), testkit::head_config(nn::Factorization::CP, {12}, 5), 200, 4);
  auto session = extracted_session(dir, fixture);
  const auto& run = session->run();
  const auto model = model::ClassifierModel::load(model::ModelFile::load(fixture.model_path));
  CounterfactualAblation engine(model.layer(), run, 5);
  for (const auto method : {AblationMethod::Naive, AblationMethod::Sparse}) {
    try {
      engine.predictions_after(0, {3, 5, 3}, method);
      ADD_FAILURE() << "a repeated expert was accepted (" << to_string(method) << ")";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("expert 3 is listed twice"), std::string::npos) << e.what();
    }
  }
  // Nothing stayed zeroed: every expert's naive answer equals a fresh engine's.
  CounterfactualAblation fresh(model.layer(), run, 5);
  for (int64_t n = 0; n < 12; ++n)
    EXPECT_EQ(engine.predictions_after(0, {n}, AblationMethod::Naive), fresh.predictions_after(0, {n}, AblationMethod::Naive))
        << "expert " << n;
}

}  // namespace
