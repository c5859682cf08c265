// Folding logit edits into the weights: the folded layer's materialised weight tensor must
// differ from the original exactly by λ āₙ at [n, bias row, o] (spec §5), and its forward pass
// must equal the live edit y_o + λ āᵀa — for CP and TR, one and two expert modes, a single
// layer and a two-layer block, and several edits at once.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "editing/edit_fold.h"
#include "editing/logit_rewrite.h"
#include "io/errors.h"
#include "reference_math.h"

namespace mumoe::editing {
namespace {

struct FoldCase {
  const char* name;
  nn::Factorization factorization;
  std::vector<int64_t> experts;
  int64_t second_dim;
};

nn::LayerConfig make_config(const FoldCase& c) {
  nn::LayerConfig config;
  config.factorization = c.factorization;
  config.input_dim = 6;
  config.output_dim = 5;
  config.expert_dims = c.experts;
  config.cp_rank = 7;
  config.tr_ranks = std::vector<int64_t>(c.experts.size() + 2, 3);
  if (c.factorization == nn::Factorization::TR) config.tr_ranks[0] = 1;  // a tensor train
  config.second_dim = c.second_dim;
  config.gate_norm = nn::GateNorm::BatchNorm;
  return config;
}

LogitEdit make_edit(int64_t output, int64_t experts, double lambda, uint64_t seed) {
  torch::manual_seed(seed);
  LogitEdit e;
  e.target = "out" + std::to_string(output);
  e.output = output;
  e.lambda = lambda;
  const auto mean = torch::rand({experts}, torch::kFloat64);
  e.mean_coefficients.assign(mean.data_ptr<double>(), mean.data_ptr<double>() + experts);
  return e;
}

class EditFold : public ::testing::TestWithParam<FoldCase> {};

TEST_P(EditFold, WeightTensorGainsExactlyLambdaMeanOnTheBiasRow) {
  const auto config = make_config(GetParam());
  nn::MuMoEBlock block(config);
  testkit::randomize(block, 11);
  block->to(torch::kFloat64);
  const int64_t n0 = config.expert_dims[0];
  const std::vector<LogitEdit> edits = {make_edit(1, n0, 3.5, 1), make_edit(4, n0, -2.0, 2), make_edit(1, n0, 0.75, 3)};
  const auto folded = fold_edits(block, edits);

  // The edited layer is the last one; a block's first layer must be unchanged in meaning.
  const bool is_block = config.is_block();
  std::vector<int64_t> dims_before, dims_after;
  const auto last_before = is_block ? block->second_layer()->factors() : block->first_layer()->factors();
  const auto last_after = is_block ? folded->second_layer()->factors() : folded->first_layer()->factors();
  const auto w_before = testkit::materialize_weight(last_before, config.factorization, dims_before);
  const auto w_after = testkit::materialize_weight(last_after, config.factorization, dims_after);
  ASSERT_EQ(dims_before, dims_after);

  // Expected: W + Σ_edits λ ā_{n1} at [n1, n2…, I, o] (later modes contribute 1).
  auto expected = w_before;
  const int64_t in = dims_before[dims_before.size() - 2], out = dims_before.back();
  int64_t later = 1;
  for (size_t e = 1; e + 2 < dims_before.size(); ++e) later *= dims_before[e];
  for (const auto& edit : edits)
    for (int64_t n1 = 0; n1 < n0; ++n1)
      for (int64_t rest = 0; rest < later; ++rest) {
        const int64_t flat = ((n1 * later + rest) * in + (in - 1)) * out + edit.output;
        expected[static_cast<size_t>(flat)] += edit.lambda * edit.mean_coefficients[static_cast<size_t>(n1)];
      }
  double worst = 0;
  for (size_t i = 0; i < expected.size(); ++i) worst = std::max(worst, std::fabs(expected[i] - w_after[i]));
  EXPECT_LT(worst, 1e-12) << GetParam().name;

  if (is_block) {
    std::vector<int64_t> d1, d2;
    const auto first_before = testkit::materialize_weight(block->first_layer()->factors(), config.factorization, d1);
    const auto first_after = testkit::materialize_weight(folded->first_layer()->factors(), config.factorization, d2);
    ASSERT_EQ(d1, d2);
    for (size_t i = 0; i < first_before.size(); ++i) ASSERT_NEAR(first_before[i], first_after[i], 1e-12);
  }
}

TEST_P(EditFold, FoldedForwardEqualsLiveEdit) {
  const auto config = make_config(GetParam());
  nn::MuMoEBlock block(config);
  testkit::randomize(block, 5);
  block->to(torch::kFloat64);
  block->eval();
  const int64_t n0 = config.expert_dims[0];
  const std::vector<LogitEdit> edits = {make_edit(0, n0, static_cast<double>(n0), 7), make_edit(3, n0, -1.5, 8)};
  auto folded = fold_edits(block, edits);
  EXPECT_EQ(folded->config().factorization, config.factorization);

  torch::NoGradGuard no_grad;
  torch::manual_seed(3);
  const auto x = torch::randn({40, config.input_dim}, torch::kFloat64);
  const auto live = block->forward(x);
  const auto expected = apply_edits(live.output, live.coefficients[0], edits);
  const auto actual = folded->forward(x);
  EXPECT_LT((actual.output - expected).abs().max().item<double>(), 1e-10) << GetParam().name;
  // The edit did change the outputs it targets, and only those.
  EXPECT_GT((expected - live.output).select(1, 0).abs().max().item<double>(), 1e-3);
  EXPECT_EQ((expected - live.output).select(1, 1).abs().max().item<double>(), 0.0);
  // Gating is untouched.
  EXPECT_TRUE(torch::equal(actual.coefficients[0], live.coefficients[0]));
}

INSTANTIATE_TEST_SUITE_P(
    Layers, EditFold,
    ::testing::Values(FoldCase{"CP", nn::Factorization::CP, {8}, 0}, FoldCase{"TT", nn::Factorization::TR, {8}, 0},
                      FoldCase{"CP-hierarchy-2", nn::Factorization::CP, {4, 3}, 0},
                      FoldCase{"TR-hierarchy-2", nn::Factorization::TR, {4, 3}, 0},
                      FoldCase{"CP-block", nn::Factorization::CP, {8}, 5},
                      FoldCase{"TR-block", nn::Factorization::TR, {8}, 5}),
    [](const auto& info) {
      std::string name = info.param.name;
      for (auto& c : name)
        if (c == '-') c = '_';
      return name;
    });

TEST(EditFold, RanksGrowByOnePerEdit) {
  nn::LayerConfig cp;
  cp.input_dim = 3;
  cp.output_dim = 2;
  cp.expert_dims = {4};
  cp.cp_rank = 5;
  EXPECT_EQ(folded_config(cp, 2).cp_rank, 7);
  auto tr = cp;
  tr.factorization = nn::Factorization::TR;
  tr.tr_ranks = {1, 4, 6};
  EXPECT_EQ(folded_config(tr, 1).tr_ranks, (std::vector<int64_t>{2, 5, 7}));
}

TEST(EditFold, RejectsEditsThatDoNotFitAndLayersWithoutBias) {
  nn::LayerConfig c;
  c.input_dim = 3;
  c.output_dim = 2;
  c.expert_dims = {4};
  c.cp_rank = 2;
  nn::MuMoEBlock block(c);
  EXPECT_THROW(fold_edits(block, {make_edit(2, 4, 1.0, 1)}), UsageError);  // output out of range
  EXPECT_THROW(fold_edits(block, {make_edit(0, 5, 1.0, 1)}), UsageError);  // ā of the wrong length
  c.use_bias = false;
  nn::MuMoEBlock no_bias(c);
  EXPECT_THROW(fold_edits(no_bias, {make_edit(0, 4, 1.0, 1)}), UsageError);
}

}  // namespace
}  // namespace mumoe::editing
