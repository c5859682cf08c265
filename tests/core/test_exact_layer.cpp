// ExactLayer (core/analysis/exact_layer.h), the layer every image-head analysis evaluates: its
// coefficients must be the model's own float32 gate values bit for bit, and its output the
// float64 layer evaluated from them — checked against the brute-force materialised weight tensor
// (reference_math.h), for the sparse path (single CP layers with entmax gates: one or two expert
// modes, with and without the bias row) and the dense one (softmax, TR, two-layer block).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "analysis/exact_layer.h"
#include "analysis_fixture.h"
#include "reference_math.h"

using namespace mumoe;

namespace exact_layer_test {

struct Case {
  std::string name;
  nn::LayerConfig config;
};

Case make_case(std::string name, nn::Factorization f, std::vector<int64_t> experts, int64_t second_dim = 0) {
  return {std::move(name), testkit::head_config(f, std::move(experts), 4, second_dim)};
}

std::vector<Case> cases() {
  std::vector<Case> out = {make_case("cp_entmax", nn::Factorization::CP, {16}),
                           make_case("cp_hierarchical_entmax", nn::Factorization::CP, {6, 5}),
                           make_case("cp_softmax", nn::Factorization::CP, {16}),
                           make_case("cp_without_bias_row", nn::Factorization::CP, {16}),
                           make_case("tr_entmax", nn::Factorization::TR, {16}),
                           make_case("cp_block", nn::Factorization::CP, {16}, 3)};
  out[2].config.gate_activation = nn::GateActivationKind::Softmax;
  out[3].config.use_bias = false;
  return out;
}

// The model's layer in float32, randomised, its gate weights scaled so that entmax is sparse
// (as trained gates are).
nn::MuMoEBlock model_layer(const nn::LayerConfig& config) {
  nn::MuMoEBlock block(config);
  testkit::randomize(block, 7);
  torch::NoGradGuard no_grad;
  for (auto& p : block->named_parameters())
    if (p.key().rfind("projs.", 0) == 0) p.value().mul_(3.0);
  block->eval();
  return block;
}

// The float64 output from `coefficients` by the materialised weight tensor (one layer, or the
// block's two with the exact GELU between them), from the given factors.
torch::Tensor reference_output(const nn::LayerConfig& config, const std::vector<torch::Tensor>& first,
                               const std::vector<torch::Tensor>& second, const torch::Tensor& x,
                               const std::vector<torch::Tensor>& coefficients) {
  auto y = testkit::reference_layer(first, config.factorization, config.use_bias, x, coefficients);
  if (!second.empty())
    y = testkit::reference_layer(second, config.factorization, config.use_bias, torch::gelu(y), coefficients);
  return y;
}

// The float64 copy's factors, cloned (layer 1, layer 2 or none).
std::pair<std::vector<torch::Tensor>, std::vector<torch::Tensor>> factors_of(const nn::MuMoEBlock& wide) {
  std::vector<torch::Tensor> first, second;
  for (const auto& f : wide->first_layer()->factors()) first.push_back(f.detach().clone());
  if (!wide->second_layer().is_empty())
    for (const auto& f : wide->second_layer()->factors()) second.push_back(f.detach().clone());
  return {first, second};
}

bool expects_sparse_path(const nn::LayerConfig& c) {
  return c.factorization == nn::Factorization::CP && !c.is_block() &&
         c.gate_activation == nn::GateActivationKind::Entmax15;
}

class ExactLayerTest : public ::testing::TestWithParam<Case> {};

TEST_P(ExactLayerTest, CoefficientsAreTheModelsAndTheOutputIsTheFloat64Layer) {
  const auto& config = GetParam().config;
  auto model = model_layer(config);
  analysis::ExactLayer exact(model, torch::kCPU);
  torch::manual_seed(3);
  const auto x = torch::randn({37, config.input_dim});  // float32, as stored inputs are
  torch::NoGradGuard no_grad;
  const auto own = model->forward(x).coefficients;
  const auto out = exact.forward(x.to(torch::kFloat64));  // float64 rows round back exactly
  ASSERT_EQ(out.coefficients.size(), own.size());
  std::vector<torch::Tensor> wide;
  for (size_t e = 0; e < own.size(); ++e) {
    EXPECT_EQ(out.coefficients[e].scalar_type(), torch::kFloat32);
    EXPECT_TRUE(torch::equal(out.coefficients[e], own[e])) << "mode " << e;
    wide.push_back(own[e].to(torch::kFloat64));
  }
  if (config.gate_activation == nn::GateActivationKind::Entmax15) {
    const double zeros = (own[0] == 0).to(torch::kFloat64).mean().item<double>();
    EXPECT_GT(zeros, 0.2) << "the entmax gates should leave experts at 0 for the sparse path to matter";
  }
  ASSERT_EQ(out.output.scalar_type(), torch::kFloat64);
  const auto [first, second] = factors_of(exact.float64_layer());
  const auto expected = reference_output(config, first, second, x.to(torch::kFloat64), wide);
  EXPECT_LT(testkit::relative_error(out.output, expected), 1e-12);
  EXPECT_EQ(exact.sums_over_nonzero_coefficients(), expects_sparse_path(config));
  // Float32 rows (as stored) give the same bits as the float64 rows they widen to.
  EXPECT_TRUE(torch::equal(exact.forward(x).output, out.output));
}

TEST_P(ExactLayerTest, ZeroedFactorSlicesAreSeenAsTheNaiveOracleNeeds) {
  const auto& config = GetParam().config;
  auto model = model_layer(config);
  analysis::ExactLayer exact(model, torch::kCPU);
  torch::manual_seed(4);
  const auto x = torch::randn({29, config.input_dim}).to(torch::kFloat64);
  torch::NoGradGuard no_grad;
  const auto before = exact.forward(x);
  const auto [first, second] = factors_of(exact.float64_layer());  // the original factors
  // W_n := 0 for expert 2 of mode 0, in every layer of the block.
  const bool cp = config.factorization == nn::Factorization::CP;
  for (auto layer : {exact.float64_layer()->first_layer(), exact.float64_layer()->second_layer()})
    if (!layer.is_empty()) layer->factors()[0].select(cp ? 0 : 1, 2).zero_();
  const auto after = exact.forward(x);
  // The same counterfactual written the other way: the original factors with a_2 := 0.
  std::vector<torch::Tensor> silenced;
  for (const auto& a : before.coefficients) silenced.push_back(a.to(torch::kFloat64));
  silenced[0].select(1, 2).zero_();
  ASSERT_GT((before.coefficients[0].select(1, 2) > 0).sum().item<int64_t>(), 0) << "expert 2 must be used";
  const auto expected = reference_output(config, first, second, x, silenced);
  EXPECT_LT(testkit::relative_error(after.output, expected), 1e-12);
  EXPECT_GT(testkit::relative_error(after.output, before.output), 1e-6) << "expert 2 must matter";
  // The gates do not change (no renormalisation), and the model's layer is untouched.
  EXPECT_TRUE(torch::equal(after.coefficients[0], before.coefficients[0]));
  EXPECT_TRUE(torch::equal(model->forward(x.to(torch::kFloat32)).coefficients[0], after.coefficients[0]));
  // Re-evaluating from given coefficients (the near-tie path) is the same arithmetic.
  EXPECT_TRUE(torch::equal(exact.output_from_coefficients(x, before.coefficients), after.output));
}

TEST_P(ExactLayerTest, ANonFiniteGateWeightReachesEveryOutput) {
  // A NaN in a gate's weights makes every coefficient NaN; the sparse path must carry them into the
  // output (a NaN is not 0) so that extraction's finiteness check names the model.
  const auto& config = GetParam().config;
  auto model = model_layer(config);
  {
    torch::NoGradGuard no_grad;
    model->named_parameters()["projs.0"][1][3] = std::numeric_limits<float>::quiet_NaN();
  }
  analysis::ExactLayer exact(model, torch::kCPU);
  const auto x = torch::randn({6, config.input_dim}).to(torch::kFloat64);
  torch::NoGradGuard no_grad;
  EXPECT_FALSE(torch::isfinite(exact.forward(x).output).any().item<bool>());
}

TEST_P(ExactLayerTest, ANonFiniteFactorOfAnUnusedExpertIsNotHidden) {
  // The model's dense product gives 0 · inf = NaN; so must the analysis (the dense path then).
  const auto& config = GetParam().config;
  auto model = model_layer(config);
  {
    torch::NoGradGuard no_grad;
    model->first_layer()->factors()[0].view(-1)[0] = std::numeric_limits<float>::infinity();
  }
  analysis::ExactLayer exact(model, torch::kCPU);
  EXPECT_FALSE(exact.sums_over_nonzero_coefficients());
  const auto x = torch::randn({6, config.input_dim}).to(torch::kFloat64);
  torch::NoGradGuard no_grad;
  EXPECT_FALSE(torch::isfinite(exact.forward(x).output).all().item<bool>());
}

TEST_P(ExactLayerTest, ANonFiniteInputGivesANonFiniteOutputRow) {
  const auto& config = GetParam().config;
  auto model = model_layer(config);
  analysis::ExactLayer exact(model, torch::kCPU);
  auto x = torch::randn({5, config.input_dim}, torch::kFloat64);
  x[3][1] = std::numeric_limits<double>::quiet_NaN();
  torch::NoGradGuard no_grad;
  const auto out = exact.forward(x).output;
  EXPECT_FALSE(torch::isfinite(out[3]).all().item<bool>());  // extraction then names the samples
  EXPECT_TRUE(torch::isfinite(out.index({torch::tensor({0, 1, 2, 4})})).all().item<bool>());
}

// Extraction's writer thread computes a dense CP layer's output from the input side computed
// beside the gates (extraction.cpp): the same bits as output_from_coefficients, which the
// materialised tensor checks; every other layer refuses the split.
TEST(ExactLayerInputSide, ADenseCpLayerSplitsIntoTheSameBitsAndOthersRefuse) {
  struct Split {
    std::string name;
    nn::LayerConfig config;
    bool splits;
  };
  const auto softmax = [](nn::LayerConfig c) {
    c.gate_activation = nn::GateActivationKind::Softmax;
    return c;
  };
  auto without_bias = softmax(testkit::head_config(nn::Factorization::CP, {16}, 4));
  without_bias.use_bias = false;
  auto input_norm = softmax(testkit::head_config(nn::Factorization::CP, {16}, 4));
  input_norm.input_layer_norm = true;
  const std::vector<Split> splits = {
      {"cp_softmax", softmax(testkit::head_config(nn::Factorization::CP, {16}, 4)), true},
      {"cp_softmax_without_bias_row", without_bias, true},
      {"cp_hierarchical_softmax", softmax(testkit::head_config(nn::Factorization::CP, {6, 5}, 4)), true},
      {"cp_entmax (sparse path)", testkit::head_config(nn::Factorization::CP, {16}, 4), false},
      {"cp_softmax_input_layer_norm", input_norm, false},
      {"tr_softmax", softmax(testkit::head_config(nn::Factorization::TR, {16}, 4)), false},
      {"cp_softmax_block", softmax(testkit::head_config(nn::Factorization::CP, {16}, 4, 3)), false}};
  for (const auto& s : splits) {
    SCOPED_TRACE(s.name);
    auto model = model_layer(s.config);
    analysis::ExactLayer exact(model, torch::kCPU);
    torch::manual_seed(5);
    const auto x = torch::randn({23, s.config.input_dim});
    torch::NoGradGuard no_grad;
    const auto coefficients = exact.coefficients(x);
    ASSERT_EQ(exact.splits_input_side(), s.splits);
    if (!s.splits) {
      EXPECT_THROW(exact.input_side(x), std::logic_error);
      EXPECT_THROW(exact.output_from_input_side(torch::zeros({23, 4}, torch::kFloat64), coefficients), std::logic_error);
      continue;
    }
    const auto side = exact.input_side(x);
    EXPECT_EQ(side.scalar_type(), torch::kFloat64);
    EXPECT_EQ(side.sizes(), (std::vector<int64_t>{23, s.config.cp_rank}));  // [M, R]
    const auto split = exact.output_from_input_side(side, coefficients);
    // An input side of other rows (or dtype) is refused, not broadcast.
    EXPECT_THROW(exact.output_from_input_side(side.slice(0, 0, 1), coefficients), std::invalid_argument);
    EXPECT_THROW(exact.output_from_input_side(side.to(torch::kFloat32), coefficients), std::invalid_argument);
    EXPECT_TRUE(torch::equal(split, exact.output_from_coefficients(x, coefficients)));  // bit for bit
    std::vector<torch::Tensor> wide;
    for (const auto& a : coefficients) wide.push_back(a.to(torch::kFloat64));
    const auto [first, second] = factors_of(exact.float64_layer());
    EXPECT_LT(testkit::relative_error(split, reference_output(s.config, first, second, x.to(torch::kFloat64), wide)),
              1e-12);
  }
}

INSTANTIATE_TEST_SUITE_P(Layers, ExactLayerTest, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace exact_layer_test
