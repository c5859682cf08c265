// entmax15: exact sort-based forward vs an independent bisection solver; closed-form backward vs
// central finite differences.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>

#include "nn/entmax.h"
#include "reference_math.h"

using mumoe::nn::entmax15;
using mumoe::testkit::entmax15_bisect;

namespace {

void expect_matches_bisection(const torch::Tensor& rows) {
  auto p = entmax15(rows);
  for (int64_t r = 0; r < rows.size(0); ++r) {
    std::vector<double> x(rows.size(1));
    for (int64_t j = 0; j < rows.size(1); ++j) x[j] = rows[r][j].item<double>();
    const auto ref = entmax15_bisect(x);
    for (int64_t j = 0; j < rows.size(1); ++j)
      ASSERT_NEAR(p[r][j].item<double>(), ref[j], 1e-12) << "row " << r << " entry " << j;
  }
}

}  // namespace

TEST(Entmax15, MatchesBisectionOnRandomRows) {
  torch::manual_seed(1);
  // d ≥ 65 with small scales: supports wider than the first top-k window (64), so the forward
  // widens it; large scales keep the support inside it.
  for (int64_t d : {1, 2, 3, 7, 64, 65, 257, 1024}) {
    for (double scale : {0.1, 1.0, 5.0, 50.0}) {
      expect_matches_bisection(torch::randn({6, d}, torch::kFloat64) * scale);
    }
  }
}

TEST(Entmax15, HandlesTiesShiftsAndConstantRows) {
  auto rows = torch::tensor({{1.0, 1.0, 1.0, 1.0},
                             {3.0, 3.0, -1.0, -1.0},
                             {1000.0, 999.0, 0.0, -1000.0},
                             {0.0, 0.0, 0.0, 5.0}},
                            torch::kFloat64);
  expect_matches_bisection(rows);
  auto p = entmax15(rows);
  EXPECT_NEAR(p[0][0].item<double>(), 0.25, 1e-15);
  EXPECT_EQ(p[3][3].item<double>(), 1.0);  // a gap of 5 > 2 leaves one expert
  EXPECT_EQ(p[3][0].item<double>(), 0.0);
}

// A row whose support is every score (constant), one whose support is exactly the first window
// (64 equal maxima), and rows mixing both in one batch, at the gate count of the large heads.
TEST(Entmax15, SupportsOfEveryWidthAtAThousandGates) {
  auto rows = torch::full({4, 1024}, -100.0, torch::kFloat64);
  rows[0].fill_(2.0);
  rows[1].slice(0, 0, 64).fill_(1.0);
  rows[2].slice(0, 100, 165).fill_(1.0);
  rows[3] = torch::linspace(0, 0.5, 1024, torch::kFloat64);
  expect_matches_bisection(rows);
  const auto p = entmax15(rows);
  EXPECT_EQ((p[0] > 0).sum().item<int64_t>(), 1024);
  EXPECT_EQ((p[1] > 0).sum().item<int64_t>(), 64);
  EXPECT_EQ((p[2] > 0).sum().item<int64_t>(), 65);
}

// The top-k forward gives the full sort's numbers to the bit (the spec's formula over all d
// sorted scores, transcribed here), so caches written by either agree.
TEST(Entmax15, EqualsTheFullSortFormulaToTheBit) {
  torch::manual_seed(3);
  for (const auto dtype : {torch::kFloat64, torch::kFloat32}) {
    const auto scores = torch::randn({300, 1024}, dtype) * torch::logspace(-1, 1.5, 300, 10, dtype).unsqueeze(1);
    const auto x = (scores - std::get<0>(scores.max(-1, true))) / 2;
    const auto sorted = std::get<0>(x.sort(-1, true));
    const auto k = torch::arange(1, 1025, x.options()).expand_as(sorted);
    const auto mean = sorted.cumsum(-1) / k, mean_sq = sorted.pow(2).cumsum(-1) / k;
    const auto tau = mean - ((1 - k * (mean_sq - mean.pow(2))) / k).clamp_min(0).sqrt();
    const auto support = (tau <= sorted).sum(-1, true);
    const auto expected = (x - tau.gather(-1, support - 1)).clamp_min(0).pow(2);
    EXPECT_TRUE(torch::equal(entmax15(scores), expected)) << dtype;
    EXPECT_GT(support.max().item<int64_t>(), 64);  // some rows needed a wider window
  }
}

TEST(Entmax15, IsSparseAndSumsToOneInFloat32AndHigherRank) {
  torch::manual_seed(2);
  auto x = torch::randn({4, 5, 128}) * 3;
  auto p = entmax15(x);
  ASSERT_EQ(p.sizes(), x.sizes());
  EXPECT_TRUE(torch::allclose(p.sum(-1), torch::ones({4, 5}), 1e-5, 1e-5));
  EXPECT_GT((p == 0).sum().item<int64_t>(), p.numel() / 2);  // most coefficients are exactly 0
  EXPECT_TRUE((p >= 0).all().item<bool>());
}

TEST(Entmax15, ARowWithNaNGivesNaNAndLeavesTheOtherRowsAlone) {
  // Found by the analyses' non-finite input test: the support count of a NaN row was 0 and the
  // threshold's gather read index −1 (an exception instead of a NaN extraction can name).
  torch::manual_seed(5);
  for (const auto dtype : {torch::kFloat32, torch::kFloat64})
    for (const int64_t d : {16, 200}) {  // within the first top-k window, and past it
      auto x = torch::randn({4, d}, dtype) * 3;
      const auto clean = entmax15(x);
      x[2][d / 2] = std::numeric_limits<double>::quiet_NaN();
      const auto p = entmax15(x);
      EXPECT_TRUE(torch::isnan(p[2]).all().item<bool>()) << d;
      const auto others = torch::tensor({0, 1, 3});
      EXPECT_TRUE(torch::equal(p.index_select(0, others), clean.index_select(0, others))) << d;
    }
}

TEST(Entmax15, GradientMatchesFiniteDifferences) {
  torch::manual_seed(3);
  for (int64_t d : {2, 5, 16}) {
    auto x = (torch::randn({3, d}, torch::kFloat64) * 2).requires_grad_(true);
    auto v = torch::randn({3, d}, torch::kFloat64);
    auto loss = (entmax15(x) * v).sum();
    auto grad = torch::autograd::grad({loss}, {x})[0];
    const double h = 1e-6;
    auto xd = x.detach();
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t j = 0; j < d; ++j) {
        auto plus = xd.clone(), minus = xd.clone();
        plus[r][j] += h;
        minus[r][j] -= h;
        const double fd = ((entmax15(plus) * v).sum() - (entmax15(minus) * v).sum()).item<double>() / (2 * h);
        EXPECT_NEAR(grad[r][j].item<double>(), fd, 1e-6) << "d=" << d << " row " << r << " entry " << j;
      }
  }
}

TEST(Entmax15, GradientIsZeroOutsideTheSupportAndSumsToZero) {
  auto x = torch::tensor({{0.0, 0.0, 0.0, 5.0, 4.5}}, torch::kFloat64).requires_grad_(true);
  auto v = torch::tensor({{1.0, 2.0, 3.0, 4.0, -1.0}}, torch::kFloat64);
  auto grad = torch::autograd::grad({(entmax15(x) * v).sum()}, {x})[0];
  EXPECT_EQ(grad[0][0].item<double>(), 0.0);
  EXPECT_NEAR(grad.sum().item<double>(), 0.0, 1e-12);  // coefficients always sum to 1
}

// The CPU kernel (row by row) against the ATen-operations path it replaced on the CPU, which stays
// the path on other devices: the same bits on widths around the top-k windows (64, 256), ties,
// −∞ entries, tiny and huge scales, non-contiguous and higher-rank inputs, in float and double.
TEST(Entmax15, CpuKernelGivesTheTensorOperationsBits) {
  torch::manual_seed(11);
  for (const auto dtype : {torch::kFloat32, torch::kFloat64}) {
    for (const int64_t d : {1, 2, 3, 7, 63, 64, 65, 200, 256, 257, 1100}) {
      auto x = torch::randn({97, d}, dtype) * torch::logspace(-3, 3, 97, 10, dtype).unsqueeze(1);
      x.slice(0, 0, 5) = torch::round(x.slice(0, 0, 5));  // ties
      if (d > 3) x[7][1] = -std::numeric_limits<double>::infinity();
      const auto kernel = mumoe::nn::entmax15(x);
      const auto reference = mumoe::nn::entmax15_reference_forward(x);
      ASSERT_TRUE(torch::equal(kernel, reference)) << dtype << " d = " << d << ": max |difference| "
                                                   << (kernel - reference).abs().max().item<double>();
    }
    const auto wide = torch::randn({6, 40, 30}, dtype).transpose(1, 2);  // [6, 30, 40], not contiguous
    EXPECT_TRUE(torch::equal(mumoe::nn::entmax15(wide), mumoe::nn::entmax15_reference_forward(wide.contiguous())));
  }
}
