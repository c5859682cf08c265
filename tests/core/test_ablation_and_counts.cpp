// Expert ablation (a_n := 0) against zeroing the expert's factor row / core slice; parameter
// counts against the exact vectors of spec §3.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "io/errors.h"
#include "nn/mumoe_block.h"
#include "reference_math.h"

using namespace mumoe;

namespace {

nn::LayerConfig make(nn::Factorization f, std::vector<int64_t> experts, int64_t second_dim) {
  nn::LayerConfig c;
  c.factorization = f;
  c.input_dim = 6;
  c.output_dim = 5;
  c.expert_dims = std::move(experts);
  c.cp_rank = 4;
  if (f == nn::Factorization::TR) {
    c.tr_ranks.assign(c.expert_dims.size() + 2, 3);
  }
  c.second_dim = second_dim;
  return c;
}

// Zeroes expert `n` of mode `e` in the weights themselves: W[…, n, …] := 0.
void zero_expert_weights(nn::MuMoEBlock& block, size_t e, int64_t n) {
  torch::NoGradGuard no_grad;
  for (auto layer : {block->first_layer(), block->second_layer()}) {
    if (!layer) continue;
    auto f = layer->factors()[e];
    if (block->config().factorization == nn::Factorization::CP)
      f[n].zero_();  // row n of the mode-e factor
    else
      f.select(1, n).zero_();  // slice [:, n, :] of the mode-e core
  }
}

class AblationEquivalence
    : public ::testing::TestWithParam<std::tuple<nn::Factorization, int64_t, int64_t>> {};

TEST_P(AblationEquivalence, ZeroCoefficientEqualsZeroWeights) {
  const auto [f, hierarchy, second_dim] = GetParam();
  const std::vector<int64_t> experts = hierarchy == 1 ? std::vector<int64_t>{8} : std::vector<int64_t>{8, 3};
  const auto c = make(f, experts, second_dim);
  nn::MuMoEBlock block(c);
  testkit::randomize(block, 11);
  block->eval();
  torch::NoGradGuard no_grad;
  auto x = torch::randn({32, c.input_dim});

  nn::ExpertAblation ablation;
  ablation.experts_per_mode = {{2, 5}};
  if (hierarchy == 2) ablation.experts_per_mode.push_back({1});
  auto ablated = block->forward(x, ablation);

  auto original = block->forward(x);
  // The same block with the experts' weights zeroed, run without any ablation.
  for (size_t e = 0; e < ablation.experts_per_mode.size(); ++e)
    for (auto n : ablation.experts_per_mode[e]) zero_expert_weights(block, e, n);
  auto zeroed = block->forward(x);

  EXPECT_TRUE(torch::equal(ablated.output, zeroed.output))
      << "max difference " << (ablated.output - zeroed.output).abs().max().item<double>();
  EXPECT_FALSE(torch::allclose(ablated.output, original.output));  // the ablation did something
  for (size_t e = 0; e < ablation.experts_per_mode.size(); ++e)
    for (auto n : ablation.experts_per_mode[e])
      EXPECT_EQ(ablated.coefficients[e].select(-1, n).abs().sum().item<double>(), 0.0);
  // No renormalisation: the remaining coefficients are unchanged.
  auto kept = original.coefficients[0].clone();
  kept.index_fill_(1, torch::tensor({2, 5}), 0);
  EXPECT_TRUE(torch::equal(kept, ablated.coefficients[0]));
}

INSTANTIATE_TEST_SUITE_P(
    Variants, AblationEquivalence,
    ::testing::Combine(::testing::Values(nn::Factorization::CP, nn::Factorization::TR),
                       ::testing::Values(int64_t{1}, int64_t{2}), ::testing::Values(int64_t{0}, int64_t{4})));

TEST(Ablation, RejectsUnknownExpertsAndModes) {
  auto c = make(nn::Factorization::CP, {8}, 0);
  nn::MuMoEBlock block(c);
  block->eval();
  auto x = torch::randn({4, c.input_dim});
  EXPECT_THROW(block->forward(x, nn::ExpertAblation::first_mode({8})), mumoe::UsageError);
  EXPECT_THROW(block->forward(x, nn::ExpertAblation::first_mode({-1})), mumoe::UsageError);
  EXPECT_THROW(block->forward(x, nn::ExpertAblation{{{}, {0}}}), mumoe::UsageError);
}

// Spec §3: exact parameter counts (gating included).
nn::LayerConfig counted(nn::Factorization f, std::vector<int64_t> experts, int64_t out) {
  nn::LayerConfig c;
  c.factorization = f;
  c.input_dim = 768;
  c.output_dim = out;
  c.expert_dims = std::move(experts);
  c.cp_rank = 512;
  c.tr_ranks = {4, 4, 512};
  return c;
}

TEST(ParameterCounts, MatchSpecVectors) {
  using nn::count_parameters;
  using nn::Factorization;
  EXPECT_EQ(count_parameters(counted(Factorization::CP, {128}, 40)).total(), 578048);
  EXPECT_EQ(count_parameters(counted(Factorization::CP, {128}, 1000)).total(), 1069568);
  EXPECT_EQ(count_parameters(counted(Factorization::CP, {128, 2}, 1000)).total(), 1072128);
  EXPECT_EQ(count_parameters(counted(Factorization::TR, {128}, 40)).total(), 1757184);
  EXPECT_EQ(count_parameters(counted(Factorization::TR, {128}, 1000)).total(), 3723264);
}

TEST(ParameterCounts, EqualTheModulesActualParameters) {
  for (auto c : {counted(nn::Factorization::CP, {128, 2}, 1000), counted(nn::Factorization::TR, {128}, 40)}) {
    c.second_dim = 17;
    c.input_layer_norm = true;
    nn::MuMoEBlock block(c);
    int64_t actual = 0;
    for (const auto& p : block->parameters()) actual += p.numel();
    EXPECT_EQ(nn::count_parameters(c).total(), actual);
  }
}

}  // namespace
