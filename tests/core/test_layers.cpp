// The factorised forward against the materialised weight tensor (spec §1), in float64 with a
// relative error ≤ 1e-10, for every variant the core supports; and the gating against a
// loop-based reference.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "io/errors.h"
#include "nn/mumoe_block.h"
#include "reference_math.h"

using namespace mumoe;
using nn::Factorization;
using nn::GateNorm;
using nn::LayerConfig;

namespace {

struct Case {
  std::string name;
  LayerConfig config;
};

LayerConfig cp(std::vector<int64_t> experts, int64_t rank, bool bias = true) {
  LayerConfig c;
  c.factorization = Factorization::CP;
  c.input_dim = 5;
  c.output_dim = 4;
  c.expert_dims = std::move(experts);
  c.cp_rank = rank;
  c.use_bias = bias;
  return c;
}

LayerConfig tr(std::vector<int64_t> experts, std::vector<int64_t> ranks, bool bias = true) {
  LayerConfig c = cp(std::move(experts), 0, bias);
  c.factorization = Factorization::TR;
  c.tr_ranks = std::move(ranks);
  return c;
}

std::vector<Case> cases() {
  std::vector<Case> out = {
      {"CP_h1_bias", cp({6}, 3)},
      {"CP_h1_nobias", cp({6}, 3, false)},
      {"CP_h2", cp({4, 3}, 3)},
      {"CP_h3", cp({3, 2, 3}, 2)},
      {"CP_h4", cp({2, 3, 2, 2}, 2)},
      {"TR_h1_bias", tr({6}, {2, 3, 2})},
      {"TR_h1_nobias", tr({6}, {2, 3, 2}, false)},
      {"TR_h2", tr({4, 3}, {2, 2, 3, 2})},
      {"TR_h3", tr({3, 2, 2}, {2, 2, 2, 3, 2})},
      {"TT_h1", tr({6}, {1, 3, 2})},
      {"TT_h2", tr({3, 4}, {1, 2, 2, 3})},
  };
  auto block_cp = cp({5}, 3);
  block_cp.second_dim = 3;
  out.push_back({"CP_block", block_cp});
  auto block_tr = tr({5}, {2, 2, 3});
  block_tr.second_dim = 3;
  block_tr.gate_norm = GateNorm::LayerNorm;
  block_tr.input_layer_norm = true;
  out.push_back({"TR_block_layernorm_inputln", block_tr});
  auto cp_ln = cp({7}, 3);
  cp_ln.gate_norm = GateNorm::LayerNorm;
  cp_ln.input_layer_norm = true;
  out.push_back({"CP_layernorm_gating_inputln", cp_ln});
  auto cp_none_softmax = cp({7}, 3);
  cp_none_softmax.gate_norm = GateNorm::None;
  cp_none_softmax.gate_activation = nn::GateActivationKind::Softmax;
  out.push_back({"CP_no_norm_softmax", cp_none_softmax});
  auto block_h2 = cp({3, 2}, 2);
  block_h2.second_dim = 6;
  out.push_back({"CP_block_h2", block_h2});
  return out;
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class FactorisedVsMaterialised : public ::testing::TestWithParam<Case> {};

TEST_P(FactorisedVsMaterialised, WholeBlockMatchesLoopReference) {
  const auto& c = GetParam().config;
  nn::MuMoEBlock block(c);
  block->to(torch::kFloat64);
  testkit::randomize(block, 42);
  block->eval();
  auto x = torch::randn({9, c.input_dim}, torch::kFloat64);
  auto out = block->forward(x);
  std::vector<torch::Tensor> ref_coeffs;
  auto ref = testkit::reference_block(block, x, ref_coeffs);
  EXPECT_LE(testkit::relative_error(out.output, ref), 1e-10);
  ASSERT_EQ(out.coefficients.size(), c.expert_dims.size());
  for (size_t e = 0; e < ref_coeffs.size(); ++e)
    EXPECT_LE((out.coefficients[e] - ref_coeffs[e]).abs().max().item<double>(), 1e-12);
  // The gating must not be degenerate, or the test would not see the expert factors.
  EXPECT_GT(out.coefficients[0].std().item<double>(), 1e-3);
}

TEST_P(FactorisedVsMaterialised, TokenInputGivesTheSameRowsAsFlatInput) {
  const auto& c = GetParam().config;
  nn::MuMoEBlock block(c);
  block->to(torch::kFloat64);
  testkit::randomize(block, 7);
  block->eval();
  auto x = torch::randn({3, 4, c.input_dim}, torch::kFloat64);
  auto tokens = block->forward(x);
  auto flat = block->forward(x.reshape({12, c.input_dim}));
  ASSERT_EQ(tokens.output.sizes(), (std::vector<int64_t>{3, 4, c.final_output_dim()}));
  ASSERT_EQ(tokens.coefficients[0].sizes(), (std::vector<int64_t>{3, 4, c.expert_dims[0]}));
  EXPECT_TRUE(torch::allclose(tokens.output.reshape({12, -1}), flat.output, 0, 0));
  std::vector<torch::Tensor> ref_coeffs;
  auto ref = testkit::reference_block(block, x.reshape({12, c.input_dim}), ref_coeffs);
  EXPECT_LE(testkit::relative_error(tokens.output.reshape({12, -1}), ref), 1e-10);
}

INSTANTIATE_TEST_SUITE_P(AllVariants, FactorisedVsMaterialised, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

TEST(MuMoEBlock, BatchNormTrainingNormalisesOverBatchAndTokens) {
  auto c = cp({6}, 3);
  nn::MuMoEBlock block(c);
  block->to(torch::kFloat64);
  testkit::randomize(block, 3);
  block->train();
  auto x = torch::randn({4, 5, c.input_dim}, torch::kFloat64);
  auto coeffs = block->coefficients(x)[0].reshape({20, 6});
  // Reference: scores normalised with the mean and biased variance over all 20 positions.
  auto s = x.reshape({20, c.input_dim}).matmul(block->named_parameters()["projs.0"]);
  auto normed = (s - s.mean(0)) / (s.var(0, /*unbiased=*/false) + c.norm_eps).sqrt();
  for (int64_t m = 0; m < 20; ++m) {
    std::vector<double> row(6);
    for (int j = 0; j < 6; ++j) row[j] = normed[m][j].item<double>();
    auto ref = testkit::entmax15_bisect(row);
    for (int j = 0; j < 6; ++j) EXPECT_NEAR(coeffs[m][j].item<double>(), ref[j], 1e-10);
  }
}

TEST(MuMoEBlock, RejectsInputsOfTheWrongWidth) {
  nn::MuMoEBlock block(cp({4}, 2));
  block->eval();
  EXPECT_THROW(block->forward(torch::randn({3, 6})), mumoe::Error);
  EXPECT_THROW(block->forward(torch::randn({5})), mumoe::Error);
}

TEST(MuMoEBlock, GradientsReachEveryParameter) {
  auto c = tr({5}, {2, 2, 3});
  c.second_dim = 3;
  nn::MuMoEBlock block(c);
  testkit::randomize(block, 5);
  block->train();
  auto out = block->forward(torch::randn({16, c.input_dim}));
  out.output.pow(2).sum().backward();
  for (const auto& p : block->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_GT(p.value().grad().abs().sum().item<double>(), 0) << p.key();
  }
}

TEST(MuMoEBlock, ParameterNamesFollowTheReferenceLayout) {
  auto c = cp({4, 3}, 2);
  c.second_dim = 3;
  c.input_layer_norm = true;
  nn::MuMoEBlock block(c);
  std::vector<std::string> names;
  for (const auto& p : block->named_parameters()) names.push_back(p.key());
  for (const auto& b : block->named_buffers()) names.push_back(b.key());
  std::sort(names.begin(), names.end());
  const std::vector<std::string> expected = {
      "MuMoE.factors.0",  "MuMoE.factors.1",  "MuMoE.factors.2",  "MuMoE.factors.3",
      "MuMoE2.factors.0", "MuMoE2.factors.1", "MuMoE2.factors.2", "MuMoE2.factors.3",
      "bn.0.num_batches_tracked", "bn.0.running_mean", "bn.0.running_var",
      "bn.1.num_batches_tracked", "bn.1.running_mean", "bn.1.running_var",
      "input_ln.bias",    "input_ln.weight",  "projs.0",          "projs.1"};
  EXPECT_EQ(names, expected);
}

TEST(Initialisation, FollowsSpecSection1) {
  torch::manual_seed(0);
  auto c = cp({256, 4}, 512);
  c.input_dim = 300;
  c.output_dim = 40;
  nn::MuMoEBlock block(c);
  auto f = block->first_layer()->factors();
  EXPECT_NEAR(f[0].mean().item<double>(), 1.0, 0.02);  // N(1, 1)
  EXPECT_NEAR(f[0].std().item<double>(), 1.0, 0.02);
  EXPECT_TRUE(torch::equal(f[1], torch::ones_like(f[1])));  // later modes: σ = 0
  EXPECT_LE(f[2].abs().max().item<double>(), std::sqrt(1.0 / 300) + 1e-7);  // U[±√(1/I)]
  EXPECT_GT(f[2].abs().max().item<double>(), 0.9 * std::sqrt(1.0 / 300));
  EXPECT_LE(f[3].abs().max().item<double>(), std::sqrt(1.0 / 512) + 1e-7);  // fan_in = R
  for (const auto& p : block->named_parameters())
    if (p.key().rfind("projs", 0) == 0) {
      EXPECT_EQ(p.value().abs().sum().item<double>(), 0.0);
    }

  auto t = tr({64, 3}, {4, 4, 4, 32});
  t.input_dim = 300;
  nn::MuMoEBlock tr_block(t);
  auto g = tr_block->first_layer()->factors();
  auto off_diagonal = g[0].clone();
  for (int64_t a = 0; a < 4; ++a) off_diagonal.select(0, a).select(1, a).zero_();
  EXPECT_EQ(off_diagonal.abs().sum().item<double>(), 0.0);  // slices are diagonal
  EXPECT_NEAR(g[0].select(0, 0).select(1, 0).std().item<double>(), 1.0, 0.3);
  auto mode2_diag = g[1].select(0, 1).select(1, 1);
  EXPECT_TRUE(torch::equal(mode2_diag, torch::ones_like(mode2_diag)));  // σ = 0: identity slices
  EXPECT_LE(g[3].abs().max().item<double>(), std::sqrt(1.0 / (32 * 4)) + 1e-7);  // fan_in = R1·R_last
}

}  // namespace
