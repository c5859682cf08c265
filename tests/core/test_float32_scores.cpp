// Class scores from the float32 arithmetic, certified (ExactLayer::certified_scores,
// float32_score_error): every score within its bound of the exact value — checked against the
// materialised weight tensor in float64 (reference_math.h), an independent evaluation — and every
// row's argmax the float64 arithmetic's, also where float32 cannot tell two classes apart.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "analysis/exact_layer.h"
#include "analysis/row_norms.h"
#include "analysis_fixture.h"
#include "reference_math.h"

using namespace mumoe;
using analysis::ExactLayer;

namespace {

// A float32 CP head with softmax gates, randomised (gate weights ×3, as the fixtures do).
nn::MuMoEBlock softmax_head(std::vector<int64_t> experts, bool use_bias = true, int64_t classes = 5) {
  auto config = testkit::head_config(nn::Factorization::CP, std::move(experts), classes);
  config.gate_activation = nn::GateActivationKind::Softmax;
  config.use_bias = use_bias;
  nn::MuMoEBlock block(config);
  testkit::randomize(block, 11);
  torch::NoGradGuard no_grad;
  for (auto& p : block->named_parameters())
    if (p.key().rfind("projs.", 0) == 0) p.value().mul_(3.0);
  block->eval();
  return block;
}

// Makes classes 0 and 1 of the head's output factor differ by `relative` (of their size): their
// scores then differ by about that much of the scores' size in every row.
void make_classes_nearly_equal(nn::MuMoEBlock& head, double relative) {
  torch::NoGradGuard no_grad;
  auto out = head->first_layer()->factors().back();  // U_O [classes, R]
  out[1].copy_(out[0] * (1 + relative));
}

struct Checked {
  int64_t rows = 0, float32_rows = 0, float32_argmax_wrong = 0;
};

// certified_scores of `rows` against the materialised tensor: bounds and argmax.
Checked check_certified(nn::MuMoEBlock& head, const torch::Tensor& rows) {
  torch::NoGradGuard no_grad;
  ExactLayer exact(head, torch::kCPU);
  EXPECT_TRUE(exact.certifies_float32_scores());
  const auto coefficients = exact.coefficients(rows);
  const auto errors = exact.float32_score_errors(rows, coefficients);
  const auto scores = exact.certified_scores(rows, exact.float32_input_side(rows), coefficients);
  std::vector<torch::Tensor> wide;
  for (const auto& a : coefficients) wide.push_back(a.to(torch::kFloat64));
  const auto factors = head->first_layer()->factors();
  std::vector<torch::Tensor> factors64;
  for (const auto& f : factors) factors64.push_back(f.to(torch::kFloat64));
  const auto reference = testkit::reference_layer(factors64, nn::Factorization::CP, head->config().use_bias,
                                                  rows.to(torch::kFloat64), wide);
  const auto float64_argmax = exact.output_from_coefficients(rows, coefficients).argmax(1);
  const auto float32_scores =
      head->output_from_coefficients(rows, coefficients).to(torch::kFloat64);  // the model's own
  Checked c;
  c.rows = rows.size(0);
  for (int64_t b = 0; b < c.rows; ++b) {
    const double bound = errors[b];
    // The reference's own rounding (float64, another order) is ~1e-15 of the scores (relative
    // only: at tiny scales an absolute slack would hide what underflow loses).
    const double slack = 1e-12 * reference[b].abs().max().item<double>();
    const double worst = (scores[b] - reference[b]).abs().max().item<double>();
    EXPECT_LE(worst, bound + slack) << "row " << b;
    EXPECT_EQ(scores[b].argmax().item<int64_t>(), float64_argmax[b].item<int64_t>()) << "row " << b;
    c.float32_rows += torch::equal(scores[b], float32_scores[b]);
    c.float32_argmax_wrong += float32_scores[b].argmax().item<int64_t>() != float64_argmax[b].item<int64_t>();
  }
  return c;
}

TEST(Float32Scores, EveryScoreLiesWithinItsBoundOfTheMaterialisedTensorsAtAnyScale) {
  for (const bool bias : {true, false})
    for (const double scale : {1e-3, 1.0, 1e3}) {
      SCOPED_TRACE((bias ? "bias, scale " : "no bias, scale ") + std::to_string(scale));
      auto head = softmax_head({16}, bias);
      const auto rows = torch::randn({300, 12}, torch::TensorOptions().dtype(torch::kFloat32)) * scale;
      const auto c = check_certified(head, rows);
      // The bound leaves most rows to the float32 arithmetic: otherwise nothing was gained.
      EXPECT_GE(c.float32_rows, c.rows * 9 / 10);
    }
}

// Inputs near float32's smallest normal numbers, without the bias row: products underflow, and
// the bound's underflow term must cover what they lose.
TEST(Float32Scores, UnderflowingProductsStayWithinTheBound) {
  auto head = softmax_head({16}, false);
  for (const double scale : {1e-37, 1e-42}) {  // products partly subnormal; products of a few bits
    SCOPED_TRACE("scale " + std::to_string(scale));
    check_certified(head, torch::randn({200, 12}) * scale);
  }
}

TEST(Float32Scores, TwoExpertModesMultiplyTheBound) {
  auto head = softmax_head({6, 5});
  const auto rows = torch::randn({300, 12});
  const auto c = check_certified(head, rows);
  EXPECT_GE(c.float32_rows, c.rows * 9 / 10);
}

// Classes 0 and 1 differ by ~1e-7 of their scores, below float32's resolution: the float32
// arithmetic picks the wrong one of the two in some rows, and those rows must be the float64
// arithmetic's.
TEST(Float32Scores, ClassesFloat32CannotTellApartGetTheFloat64ArithmeticsArgmax) {
  auto head = softmax_head({16}, true, 4);
  make_classes_nearly_equal(head, 1e-7);
  const auto rows = torch::randn({400, 12});
  const auto c = check_certified(head, rows);
  EXPECT_GT(c.float32_argmax_wrong, 0) << "the test needs rows that float32 decides wrongly";
  EXPECT_LT(c.float32_rows, c.rows);
}

TEST(Float32Scores, ABoundIsTheFormulaOfItsNorms) {
  // float32_score_errors = scale · ‖z̃‖₂ · Π_e ‖a_e‖₁ for every row: one row by hand.
  auto head = softmax_head({6, 5});
  ExactLayer exact(head, torch::kCPU);
  torch::NoGradGuard no_grad;
  const auto rows = torch::randn({3, 12});
  const auto coefficients = exact.coefficients(rows);
  const auto errors = exact.float32_score_errors(rows, coefficients);
  for (int64_t b = 0; b < 3; ++b) {
    std::vector<double> masses;
    for (const auto& a : coefficients) masses.push_back(a[b].to(torch::kFloat64).abs().sum().item<double>());
    const double by_hand = exact.float32_score_error(rows[b].contiguous().data_ptr<float>(), masses.data());
    EXPECT_NEAR(errors[b], by_hand, 1e-12 * by_hand);
  }
  // Without the bias column the bound is linear in ‖z‖ (but for the underflow term, ~1e-40):
  // doubling the input doubles it.
  auto no_bias = softmax_head({16}, false);
  ExactLayer exact_no_bias(no_bias, torch::kCPU);
  const auto x = torch::randn({1, 12});
  const double one = 1.0;
  const double once = exact_no_bias.float32_score_error(x.data_ptr<float>(), &one);
  const auto twice_x = (x * 2).contiguous();
  EXPECT_NEAR(exact_no_bias.float32_score_error(twice_x.data_ptr<float>(), &one), 2 * once, 1e-12 * once);
  EXPECT_GT(once, 0);
  // A zero input leaves only the underflow term: positive, far below any float.
  const auto zero = torch::zeros({12});
  const double floor = exact_no_bias.float32_score_error(zero.data_ptr<float>(), &one);
  EXPECT_GT(floor, 0);
  EXPECT_LT(floor, 1e-38);
}

TEST(Float32Scores, OnlyDenseSingleCpLayersWithFloat32GatesOnTheCpuCertify) {
  const auto certifies = [](nn::LayerConfig config, torch::Dtype dtype = torch::kFloat32,
                            torch::Device device = torch::kCPU) {
    nn::MuMoEBlock block(config);
    block->to(dtype);
    return ExactLayer::certifies_float32_scores(block, device);
  };
  auto softmax = testkit::head_config(nn::Factorization::CP, {8}, 3);
  softmax.gate_activation = nn::GateActivationKind::Softmax;
  EXPECT_TRUE(certifies(softmax));
  EXPECT_FALSE(certifies(softmax, torch::kFloat64));  // a float64 model's scores are float64 already
  EXPECT_FALSE(certifies(softmax, torch::kFloat32, torch::Device(torch::kCUDA, 0)));
  auto entmax = softmax;
  entmax.gate_activation = nn::GateActivationKind::Entmax15;  // the sparse float64 path
  EXPECT_FALSE(certifies(entmax));
  auto tr = testkit::head_config(nn::Factorization::TR, {8}, 3);
  tr.gate_activation = nn::GateActivationKind::Softmax;
  EXPECT_FALSE(certifies(tr));
  auto norm = softmax;
  norm.input_layer_norm = true;
  EXPECT_FALSE(certifies(norm));
  auto block = testkit::head_config(nn::Factorization::CP, {8}, 3, 4);
  block.gate_activation = nn::GateActivationKind::Softmax;
  EXPECT_FALSE(certifies(block));
}

TEST(Float32Scores, WrongArgumentsAreRefused) {
  auto head = softmax_head({16});
  ExactLayer exact(head, torch::kCPU);
  torch::NoGradGuard no_grad;
  const auto rows = torch::randn({4, 12});
  const auto coefficients = exact.coefficients(rows);
  EXPECT_THROW(exact.certified_scores(rows, torch::Tensor(), coefficients, std::vector<double>(3, 1.0)),
               std::invalid_argument);
  auto entmax_config = testkit::head_config(nn::Factorization::CP, {8}, 3);
  nn::MuMoEBlock entmax(entmax_config);
  ExactLayer sparse(entmax, torch::kCPU);
  EXPECT_THROW(sparse.float32_input_side(torch::randn({2, 12})), std::logic_error);
}

TEST(RowNorms, EightLanesSumAsTheSequentialLoopDoesUpToRounding) {
  for (const int64_t n : {0, 1, 7, 8, 9, 16, 17, 1000, 1031}) {
    std::vector<float> f(static_cast<size_t>(n));
    std::vector<double> d(static_cast<size_t>(n));
    double abs_sum = 0, squares = 0;
    for (int64_t i = 0; i < n; ++i) {
      f[i] = static_cast<float>(std::sin(0.37 * i) * (i % 3 == 0 ? -1 : 1));
      d[i] = f[i];
      abs_sum += std::fabs(d[i]);
      squares += d[i] * d[i];
    }
    EXPECT_NEAR(analysis::sum_of_abs(f.data(), n), abs_sum, 1e-13 * (1 + abs_sum)) << n;
    EXPECT_NEAR(analysis::sum_of_abs(d.data(), n), abs_sum, 1e-13 * (1 + abs_sum)) << n;
    EXPECT_NEAR(analysis::sum_of_squares(f.data(), n), squares, 1e-13 * (1 + squares)) << n;
  }
}

TEST(RowNorms, TopTwoIsArgmaxWithTheRunnerUp) {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<std::pair<std::vector<double>, analysis::TopTwo>> cases = {
      {{3.0}, {3.0, -inf, 0}},                 // one value: no runner-up
      {{1.0, 5.0, 5.0, 2.0}, {5.0, 5.0, 1}},   // a shared maximum: the first index, margin 0
      {{-1.0, -3.0, -2.0}, {-1.0, -2.0, 0}},
      {{0.5, 0.25, 0.75, 0.7}, {0.75, 0.7, 2}},
      {{-inf, -inf, 1.0}, {1.0, -inf, 2}}};
  for (const auto& [values, want] : cases) {
    const auto got = analysis::top_two(values.data(), static_cast<int64_t>(values.size()));
    EXPECT_EQ(got.first, want.first);
    EXPECT_EQ(got.second, want.second);
    EXPECT_EQ(got.index, want.index);
    const auto t = torch::tensor(values, torch::kFloat64);
    EXPECT_EQ(got.index, t.argmax().item<int64_t>());  // as argmax
  }
}

}  // namespace
