// Sparse and soft MoE routers (core/nn/moe_routing.h, moe_layer.h) against direct transcriptions
// of the router study's algorithms, written here as plain loops over tokens, experts and slots
// on std::vector<double> (no tensor operation of the code under test): Algorithm 1 (Token
// Choice), Algorithm 2 (Expert Choice), Sinkhorn's iterations, the k-sparse simplex projection by
// enumerating every support, the sparsity-constrained semi-dual iterations, Soft MoE's two
// softmaxes, and whole layers (routing, slots, experts with exact GELU, combine) for all six
// routers — on small inputs with capacity overflow, dropped tokens and ties.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "io/errors.h"
#include "nn/moe_layer.h"
#include "nn/moe_routing.h"

using namespace mumoe;
using nn::RouterKind;

namespace {

using Matrix = std::vector<std::vector<double>>;  // [rows][columns]
using Slots = std::vector<std::vector<std::vector<double>>>;  // [token][expert][slot]

Matrix to_matrix(const torch::Tensor& t) {
  const auto c = t.detach().to(torch::kCPU, torch::kDouble).contiguous();
  Matrix m(static_cast<size_t>(c.size(0)), std::vector<double>(static_cast<size_t>(c.size(1))));
  auto a = c.accessor<double, 2>();
  for (int64_t i = 0; i < c.size(0); ++i)
    for (int64_t j = 0; j < c.size(1); ++j) m[i][j] = a[i][j];
  return m;
}

torch::Tensor to_tensor(const Matrix& m) {
  auto t = torch::zeros({static_cast<int64_t>(m.size()), static_cast<int64_t>(m[0].size())}, torch::kDouble);
  auto a = t.accessor<double, 2>();
  for (size_t i = 0; i < m.size(); ++i)
    for (size_t j = 0; j < m[i].size(); ++j) a[i][j] = m[i][j];
  return t;
}

Slots zeros(size_t m, size_t n, size_t p) {
  return Slots(m, std::vector<std::vector<double>>(n, std::vector<double>(p, 0.0)));
}

void expect_slots(const torch::Tensor& actual, const Slots& expected, double tolerance = 0) {
  const auto c = actual.detach().to(torch::kCPU, torch::kDouble).contiguous();
  ASSERT_EQ(c.size(0), static_cast<int64_t>(expected.size()));
  ASSERT_EQ(c.size(1), static_cast<int64_t>(expected[0].size()));
  ASSERT_EQ(c.size(2), static_cast<int64_t>(expected[0][0].size()));
  auto a = c.accessor<double, 3>();
  for (size_t t = 0; t < expected.size(); ++t)
    for (size_t i = 0; i < expected[t].size(); ++i)
      for (size_t j = 0; j < expected[t][i].size(); ++j)
        ASSERT_NEAR(a[t][i][j], expected[t][i][j], tolerance) << "token " << t << ", expert " << i << ", slot " << j;
}

/// The r-th choice of a row by repeated scans: the largest not yet chosen, the lower index on ties.
std::vector<size_t> choices(const std::vector<double>& row, size_t count) {
  std::vector<size_t> chosen;
  std::vector<bool> taken(row.size(), false);
  for (size_t r = 0; r < count; ++r) {
    size_t best = row.size();
    for (size_t i = 0; i < row.size(); ++i)
      if (!taken[i] && (best == row.size() || row[i] > row[best])) best = i;
    taken[best] = true;
    chosen.push_back(best);
  }
  return chosen;
}

/// Algorithm 1, transcribed.
void algorithm1(const Matrix& dispatch, const Matrix& combine, size_t p, size_t k, Slots& d, Slots& c) {
  const size_t m = dispatch.size(), n = dispatch[0].size();
  d = zeros(m, n, p);
  c = zeros(m, n, p);
  std::vector<size_t> filled(n, 0);
  for (size_t r = 0; r < k; ++r)
    for (size_t t = 0; t < m; ++t) {
      const size_t i = choices(dispatch[t], k)[r];
      if (filled[i] < p) {
        d[t][i][filled[i]] = 1;
        c[t][i][filled[i]] = combine[t][i];
        ++filled[i];
      }
    }
}

/// Algorithm 2, transcribed.
void algorithm2(const Matrix& dispatch, const Matrix& combine, size_t p, Slots& d, Slots& c) {
  const size_t m = dispatch.size(), n = dispatch[0].size();
  d = zeros(m, n, p);
  c = zeros(m, n, p);
  for (size_t i = 0; i < n; ++i) {
    std::vector<double> column(m);
    for (size_t t = 0; t < m; ++t) column[t] = dispatch[t][i];
    const auto top = choices(column, p);
    for (size_t j = 0; j < p; ++j) {
      d[top[j]][i][j] = 1;
      c[top[j]][i][j] = combine[top[j]][i];
    }
  }
}

Matrix softmax_rows(const Matrix& logits) {
  Matrix out = logits;
  for (auto& row : out) {
    const double top = *std::max_element(row.begin(), row.end());
    double sum = 0;
    for (auto& v : row) sum += (v = std::exp(v - top));
    for (auto& v : row) v /= sum;
  }
  return out;
}

/// Sinkhorn in the linear domain (inputs here are small): rows to 1/m, then columns to 1/n.
Matrix sinkhorn(const Matrix& logits, int iterations) {
  const size_t m = logits.size(), n = logits[0].size();
  Matrix k = logits;
  for (auto& row : k)
    for (auto& v : row) v = std::exp(v);
  for (int it = 0; it < iterations; ++it) {
    for (auto& row : k) {
      double s = 0;
      for (double v : row) s += v;
      for (auto& v : row) v /= s * static_cast<double>(m);
    }
    for (size_t i = 0; i < n; ++i) {
      double s = 0;
      for (size_t t = 0; t < m; ++t) s += k[t][i];
      for (size_t t = 0; t < m; ++t) k[t][i] /= s * static_cast<double>(n);
    }
  }
  for (auto& row : k)
    for (auto& v : row) v *= static_cast<double>(m);
  return k;
}

/// The simplex projection restricted to `support`, by bisection on τ (Σ max(v − τ, 0) = 1).
std::vector<double> project_on_support(const std::vector<double>& v, const std::vector<size_t>& support) {
  double lo = -1e6, hi = 1e6;
  for (int it = 0; it < 200; ++it) {
    const double tau = (lo + hi) / 2;
    double s = 0;
    for (size_t i : support) s += std::max(0.0, v[i] - tau);
    (s > 1 ? lo : hi) = tau;
  }
  std::vector<double> out(v.size(), 0.0);
  for (size_t i : support) out[i] = std::max(0.0, v[i] - (lo + hi) / 2);
  return out;
}

/// The k-sparse simplex projection by trying every support of size ≤ k.
std::vector<double> sparse_projection_brute_force(const std::vector<double>& v, size_t k) {
  const size_t d = v.size();
  std::vector<double> best;
  double best_distance = std::numeric_limits<double>::infinity();
  for (uint32_t bits = 1; bits < (1u << d); ++bits) {
    std::vector<size_t> support;
    for (size_t i = 0; i < d; ++i)
      if (bits & (1u << i)) support.push_back(i);
    if (support.size() > k) continue;
    const auto w = project_on_support(v, support);
    double distance = 0;
    for (size_t i = 0; i < d; ++i) distance += (w[i] - v[i]) * (w[i] - v[i]);
    if (distance < best_distance - 1e-12) {
      best_distance = distance;
      best = w;
    }
  }
  return best;
}

/// The same projection in closed form: sparsemax of the k largest (after the brute force above has
/// shown the two agree; the iterations below must not amplify the bisection's rounding).
std::vector<double> sparse_projection_sorted(const std::vector<double>& v, size_t k) {
  std::vector<size_t> order(v.size());
  for (size_t i = 0; i < v.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] > v[b]; });
  order.resize(std::min(k, v.size()));
  double sum = 0, tau = 0;
  for (size_t j = 0; j < order.size(); ++j) {
    sum += v[order[j]];
    if (v[order[j]] > (sum - 1) / static_cast<double>(j + 1)) tau = (sum - 1) / static_cast<double>(j + 1);
  }
  std::vector<double> out(v.size(), 0.0);
  for (size_t i : order) out[i] = std::max(0.0, v[i] - tau);
  return out;
}

/// Soft MoE's routing tensors from slot logits [m][n·p], transcribed: dispatch = each slot's
/// softmax over the tokens, combine = each token's softmax over every slot.
void soft_moe_transcription(const Matrix& l, size_t n, size_t p, Slots& d, Slots& c) {
  const size_t m = l.size();
  d = zeros(m, n, p);
  c = zeros(m, n, p);
  for (size_t s = 0; s < n * p; ++s) {
    double sum = 0;
    for (size_t t = 0; t < m; ++t) sum += std::exp(l[t][s]);
    for (size_t t = 0; t < m; ++t) d[t][s / p][s % p] = std::exp(l[t][s]) / sum;
  }
  for (size_t t = 0; t < m; ++t) {
    double sum = 0;
    for (size_t s = 0; s < n * p; ++s) sum += std::exp(l[t][s]);
    for (size_t s = 0; s < n * p; ++s) c[t][s / p][s % p] = std::exp(l[t][s]) / sum;
  }
}

double gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

/// One expert on one input vector: W1, b1 (and W2, b2 when two-layer), all as read from the layer.
struct ExpertWeights {
  torch::Tensor w1, b1, w2, b2;
};

std::vector<double> run_expert(const ExpertWeights& w, size_t i, const std::vector<double>& x, bool two_layer) {
  auto w1 = w.w1.accessor<double, 3>();
  auto b1 = w.b1.accessor<double, 2>();
  std::vector<double> h(static_cast<size_t>(w.w1.size(2)));
  for (size_t o = 0; o < h.size(); ++o) {
    double s = b1[i][o];
    for (size_t a = 0; a < x.size(); ++a) s += x[a] * w1[i][a][o];
    h[o] = two_layer ? gelu(s) : s;
  }
  if (!two_layer) return h;
  auto w2 = w.w2.accessor<double, 3>();
  auto b2 = w.b2.accessor<double, 2>();
  std::vector<double> y(static_cast<size_t>(w.w2.size(2)));
  for (size_t o = 0; o < y.size(); ++o) {
    double s = b2[i][o];
    for (size_t a = 0; a < h.size(); ++a) s += h[a] * w2[i][a][o];
    y[o] = s;
  }
  return y;
}

/// The unified layer on one group, transcribed: slot inputs, experts, combine; ablated experts'
/// combine weights are zero.
Matrix unified_layer(const Matrix& x, const Slots& d, const Slots& c, const ExpertWeights& w, bool two_layer,
                     const std::vector<size_t>& ablated = {}) {
  const size_t m = x.size(), n = d[0].size(), p = d[0][0].size(), in = x[0].size();
  const size_t out_dim = static_cast<size_t>(two_layer ? w.w2.size(2) : w.w1.size(2));
  Matrix y(m, std::vector<double>(out_dim, 0.0));
  for (size_t i = 0; i < n; ++i) {
    if (std::find(ablated.begin(), ablated.end(), i) != ablated.end()) continue;
    for (size_t j = 0; j < p; ++j) {
      std::vector<double> slot(in, 0.0);
      for (size_t t = 0; t < m; ++t)
        for (size_t a = 0; a < in; ++a) slot[a] += d[t][i][j] * x[t][a];
      const auto out = run_expert(w, i, slot, two_layer);
      for (size_t t = 0; t < m; ++t)
        for (size_t o = 0; o < out_dim; ++o) y[t][o] += c[t][i][j] * out[o];
    }
  }
  return y;
}

Matrix matmul(const Matrix& x, const Matrix& w) {
  Matrix out(x.size(), std::vector<double>(w[0].size(), 0.0));
  for (size_t t = 0; t < x.size(); ++t)
    for (size_t i = 0; i < w[0].size(); ++i)
      for (size_t a = 0; a < w.size(); ++a) out[t][i] += x[t][a] * w[a][i];
  return out;
}

}  // namespace

TEST(MoERouting, TokenChoiceIsAlgorithmOneWithOverflowAndTies) {
  torch::manual_seed(0);
  // Random affinities; capacity 2 of 8 tokens over 3 experts with k = 2: some choices overflow.
  const auto a = torch::softmax(torch::randn({8, 3}, torch::kDouble) * 2, 1);
  const auto combine = torch::rand({8, 3}, torch::kDouble);
  for (int64_t k : {1, 2, 3}) {
    const auto r = nn::token_choice_allocation(a, combine, 2, k);
    Slots d, c;
    algorithm1(to_matrix(a), to_matrix(combine), 2, static_cast<size_t>(k), d, c);
    expect_slots(r.dispatch, d);
    expect_slots(r.combine, c);
  }
  // Every token prefers expert 0 (capacity 3): the first three get it, the rest are dropped. With
  // k = 2 the second choices (expert 1, by the tie rule) go in token order too: the same first
  // three tokens fill expert 1, and the last three are dropped again — Algorithm 1's weakness.
  Matrix same(6, {0.5, 0.25, 0.25});
  const auto tied = to_tensor(same);
  const auto r1 = nn::token_choice_allocation(tied, tied, 3, 1);
  EXPECT_EQ(nn::dropped_tokens(r1.dispatch), 3);
  Slots d, c;
  algorithm1(same, same, 3, 1, d, c);
  expect_slots(r1.dispatch, d);
  const auto r2 = nn::token_choice_allocation(tied, tied, 3, 2);
  algorithm1(same, same, 3, 2, d, c);
  expect_slots(r2.dispatch, d);
  EXPECT_EQ(nn::dropped_tokens(r2.dispatch), 3);
  EXPECT_EQ(r2.dispatch.select(1, 1).sum().item<double>(), 3.0);  // expert 1 full, expert 2 empty
  EXPECT_EQ(r2.dispatch.select(1, 2).sum().item<double>(), 0.0);
  // Bad input is refused, not routed.
  EXPECT_THROW(nn::token_choice_allocation(tied, tied, 0, 1), UsageError);
  EXPECT_THROW(nn::token_choice_allocation(tied, tied, 1, 4), UsageError);
  auto nan = tied.clone();
  nan[0][0] = std::nan("");
  EXPECT_THROW(nn::token_choice_allocation(nan, tied, 1, 1), UsageError);
}

TEST(MoERouting, ExpertChoiceIsAlgorithmTwoWithTies) {
  torch::manual_seed(1);
  const auto a = torch::softmax(torch::randn({7, 4}, torch::kDouble), 1);
  const auto combine = torch::rand({7, 4}, torch::kDouble);
  for (int64_t p : {1, 3, 7}) {
    const auto r = nn::expert_choice_allocation(a, combine, p);
    Slots d, c;
    algorithm2(to_matrix(a), to_matrix(combine), static_cast<size_t>(p), d, c);
    expect_slots(r.dispatch, d);
    expect_slots(r.combine, c);
  }
  // Equal affinities everywhere: every expert takes the first p tokens; the rest are dropped.
  Matrix flat(5, {0.5, 0.5});
  const auto r = nn::expert_choice_allocation(to_tensor(flat), to_tensor(flat), 2);
  Slots d, c;
  algorithm2(flat, flat, 2, d, c);
  expect_slots(r.dispatch, d);
  EXPECT_EQ(nn::dropped_tokens(r.dispatch), 3);
  EXPECT_THROW(nn::expert_choice_allocation(to_tensor(flat), to_tensor(flat), 6), UsageError);
}

TEST(MoERouting, SinkhornIsTheAlternatingNormalisation) {
  torch::manual_seed(2);
  const auto logits = torch::randn({6, 3}, torch::kDouble);
  for (int iterations : {1, 5, 30}) {
    const auto plan = nn::sinkhorn_plan(logits, iterations);
    const auto expected = sinkhorn(to_matrix(logits), iterations);
    const auto got = to_matrix(plan);
    for (size_t t = 0; t < 6; ++t)
      for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(got[t][i], expected[t][i], 1e-12);
  }
  // Converged: rows sum to 1, columns to m / n (every expert the same mass).
  const auto plan = nn::sinkhorn_plan(logits, 200);
  EXPECT_LT((plan.sum(1) - 1).abs().max().item<double>(), 1e-9);
  EXPECT_LT((plan.sum(0) - 2).abs().max().item<double>(), 1e-9);
  // Large logits do not overflow (log domain).
  EXPECT_TRUE(torch::isfinite(nn::sinkhorn_plan(logits * 1000, 10)).all().item<bool>());
}

TEST(MoERouting, SparseSimplexProjectionIsTheBestKSparseProjection) {
  torch::manual_seed(3);
  for (int trial = 0; trial < 40; ++trial) {
    const auto v = torch::randn({6}, torch::kDouble) * (trial % 4 + 0.5);
    for (int64_t k : {1, 2, 3, 6}) {
      const auto got = nn::sparse_simplex_projection(v, k);
      std::vector<double> values(6);
      for (int64_t i = 0; i < 6; ++i) values[i] = v[i].item<double>();
      const auto expected = sparse_projection_brute_force(values, static_cast<size_t>(k));
      for (size_t i = 0; i < 6; ++i) ASSERT_NEAR(got[static_cast<int64_t>(i)].item<double>(), expected[i], 1e-9);
      EXPECT_NEAR(got.sum().item<double>(), 1.0, 1e-12);
      EXPECT_LE((got > 0).sum().item<int64_t>(), k);
    }
  }
}

TEST(MoERouting, SparsityConstrainedPlanFollowsItsSemiDualIterations) {
  torch::manual_seed(4);
  const int64_t m = 6, n = 3, p = 2;
  const auto utility = torch::softmax(torch::randn({m, n}, torch::kDouble), 1);
  const double gamma = 0.5, step = 0.5;
  for (int64_t iterations : {0, 1, 10}) {
    SCOPED_TRACE("iterations " + std::to_string(iterations));
    const auto plan = nn::sparsity_constrained_plan(utility, p, gamma, iterations, step);
    // The same iterations as loops, with the brute-force projection.
    const auto u = to_matrix(utility);
    std::vector<double> alpha(m, 0.0);
    Matrix expected(m, std::vector<double>(n, 0.0));
    const double b = 1.0 / n;
    for (int64_t it = 0;; ++it) {
      for (int64_t i = 0; i < n; ++i) {
        std::vector<double> column(m);
        for (int64_t t = 0; t < m; ++t) column[t] = (u[t][i] - alpha[t]) / (gamma * b);
        const auto q = sparse_projection_sorted(column, p);
        if (it == 0) {  // and the closed form is the brute-force best k-sparse projection
          const auto brute = sparse_projection_brute_force(column, p);
          for (int64_t t = 0; t < m; ++t) ASSERT_NEAR(q[t], brute[t], 1e-9);
        }
        for (int64_t t = 0; t < m; ++t) expected[t][i] = b * q[t];
      }
      if (it == iterations) break;
      for (int64_t t = 0; t < m; ++t) {
        double row = 0;
        for (int64_t i = 0; i < n; ++i) row += expected[t][i];
        alpha[t] += step / std::sqrt(1.0 + static_cast<double>(it)) * gamma * b * (m * row - 1.0);
      }
    }
    const auto got = to_matrix(plan);
    for (int64_t t = 0; t < m; ++t)
      for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(got[t][i], expected[t][i] * m, 1e-8);
    // Whatever the iterations: at most p nonzeros a column, columns sum to m / n.
    EXPECT_LE((plan > 0).sum(0).max().item<int64_t>(), p);
    EXPECT_LT((plan.sum(0) - static_cast<double>(m) / n).abs().max().item<double>(), 1e-9);
  }
}

TEST(MoERouting, SoftMoERoutingIsTwoSoftmaxes) {
  torch::manual_seed(5);
  const int64_t m = 4, n = 3, p = 2;
  const auto logits = torch::randn({m, n * p}, torch::kDouble);
  const auto r = nn::soft_moe_routing(logits, n);
  Slots d, c;
  soft_moe_transcription(to_matrix(logits), n, p, d, c);
  expect_slots(r.dispatch, d, 1e-12);
  expect_slots(r.combine, c, 1e-12);
}

namespace {

/// A layer of each router in float64, and the transcription of its routing on one group.
struct LayerCase {
  RouterKind router;
  int64_t hidden;
};

void transcribe_routing(const nn::MoELayerConfig& config, const Matrix& tokens, const Matrix& router, Slots& d, Slots& c) {
  const auto logits = matmul(tokens, router);
  const auto affinity = softmax_rows(logits);
  const auto p = static_cast<size_t>(config.capacity(static_cast<int64_t>(tokens.size())));
  const auto k = static_cast<size_t>(config.k);
  switch (config.router) {
    case RouterKind::SoftmaxTokenChoice: algorithm1(affinity, affinity, p, k, d, c); break;
    case RouterKind::SinkhornTokenChoice:
      algorithm1(sinkhorn(logits, static_cast<int>(config.sinkhorn_iterations)), affinity, p, k, d, c);
      break;
    case RouterKind::SoftmaxExpertChoice: algorithm2(affinity, affinity, p, d, c); break;
    case RouterKind::SinkhornExpertChoice:
      algorithm2(sinkhorn(logits, static_cast<int>(config.sinkhorn_iterations)), affinity, p, d, c);
      break;
    case RouterKind::SparsityExpertChoice: {
      // The plan is checked against its own transcription above; here it is taken as given.
      const auto plan = to_matrix(nn::sparsity_constrained_plan(to_tensor(affinity), static_cast<int64_t>(p),
                                                                config.sparsity_gamma, config.sparsity_iterations));
      algorithm2(plan, affinity, p, d, c);
      break;
    }
    case RouterKind::SoftMoE: FAIL() << "per input, not per group";
  }
}

}  // namespace

TEST(MoELayer, EveryRouterIsTheUnifiedFormOnItsGroups) {
  const std::vector<LayerCase> cases = {
      {RouterKind::SoftmaxTokenChoice, 0},   {RouterKind::SinkhornTokenChoice, 5}, {RouterKind::SoftmaxExpertChoice, 5},
      {RouterKind::SinkhornExpertChoice, 0}, {RouterKind::SparsityExpertChoice, 5},
  };
  for (const auto& lc : cases) {
    SCOPED_TRACE(nn::to_string(lc.router));
    torch::manual_seed(6);
    nn::MoELayerConfig config;
    config.router = lc.router;
    config.input_dim = 4;
    config.hidden_dim = lc.hidden;
    config.output_dim = 3;
    config.experts = 3;
    config.k = nn::is_token_choice(lc.router) ? 2 : 1;
    config.capacity_factor = 0.6;  // tight: token choice drops choices, expert choice skips tokens
    config.group_size = 5;         // 12 rows: groups of 5, 5 and 2
    nn::MoELayer layer(config);
    layer->to(torch::kDouble);
    const auto x = torch::randn({4, 3, 4}, torch::kDouble);  // [B, T, I]: 12 tokens
    const std::vector<int64_t> ablated = {1};
    const auto out = layer->forward(x, ablated);
    ASSERT_EQ(out.output.sizes(), (std::vector<int64_t>{4, 3, 3}));
    ASSERT_EQ(out.coefficients.sizes(), (std::vector<int64_t>{4, 3, 3}));
    auto params = layer->named_parameters();
    ExpertWeights w{params["experts_w1"], params["experts_b1"], lc.hidden ? params["experts_w2"] : torch::Tensor(),
                    lc.hidden ? params["experts_b2"] : torch::Tensor()};
    const auto router = to_matrix(params["router"]);
    const auto rows = to_matrix(x.reshape({12, 4}));
    const auto got = to_matrix(out.output.reshape({12, 3}));
    const auto coefficients = to_matrix(out.coefficients.reshape({12, 3}));
    int64_t dropped = 0;
    for (size_t start = 0; start < 12; start += 5) {
      const Matrix group(rows.begin() + start, rows.begin() + std::min<size_t>(12, start + 5));
      Slots d, c;
      transcribe_routing(config, group, router, d, c);
      const auto expected = unified_layer(group, d, c, w, lc.hidden > 0, {1});
      for (size_t t = 0; t < group.size(); ++t) {
        for (size_t o = 0; o < 3; ++o) EXPECT_NEAR(got[start + t][o], expected[t][o], 1e-10);
        double taken = 0;
        for (size_t i = 0; i < 3; ++i) {
          double weight = 0;
          for (size_t j = 0; j < c[t][i].size(); ++j) weight += c[t][i][j], taken += d[t][i][j];
          EXPECT_NEAR(coefficients[start + t][i], i == 1 ? 0.0 : weight, 1e-12);  // expert 1 ablated
        }
        dropped += taken == 0;
      }
    }
    EXPECT_EQ(out.dropped_tokens, dropped);
    EXPECT_EQ(out.tokens, 12);
  }
}

TEST(MoELayer, SoftMoEMixesTheTokensOfEachInput) {
  torch::manual_seed(7);
  nn::MoELayerConfig config;
  config.router = RouterKind::SoftMoE;
  config.input_dim = 4;
  config.hidden_dim = 6;
  config.output_dim = 2;
  config.experts = 3;
  config.slots_per_expert = 2;
  nn::MoELayer layer(config);
  layer->to(torch::kDouble);
  const auto x = torch::randn({2, 5, 4}, torch::kDouble);
  const auto out = layer->forward(x, {2});
  auto params = layer->named_parameters();
  ExpertWeights w{params["experts_w1"], params["experts_b1"], params["experts_w2"], params["experts_b2"]};
  const auto phi = to_matrix(params["router"]);
  for (int64_t b = 0; b < 2; ++b) {
    const auto tokens = to_matrix(x[b]);
    const auto l = matmul(tokens, phi);
    Slots d, c;
    soft_moe_transcription(l, 3, 2, d, c);
    const auto expected = unified_layer(tokens, d, c, w, true, {2});
    const auto got = to_matrix(out.output[b]);
    for (size_t t = 0; t < 5; ++t)
      for (size_t o = 0; o < 2; ++o) EXPECT_NEAR(got[t][o], expected[t][o], 1e-10);
  }
  EXPECT_EQ(out.dropped_tokens, 0);
  // A head's rows ([B, I]) are inputs of one token: every slot holds the row itself.
  const auto rows = torch::randn({3, 4}, torch::kDouble);
  const auto head = layer->forward(rows);
  const auto as_sequences = layer->forward(rows.unsqueeze(1));
  EXPECT_LT((head.output - as_sequences.output.squeeze(1)).abs().max().item<double>(), 1e-12);
  EXPECT_NEAR(head.coefficients.sum(1).mean().item<double>(), 1.0, 1e-12);  // slot weights sum to 1
}

TEST(MoELayer, TrainsThroughTheCombineWeightsAndStatesItsShape) {
  torch::manual_seed(8);
  for (auto router : {RouterKind::SoftmaxTokenChoice, RouterKind::SinkhornExpertChoice, RouterKind::SoftMoE}) {
    SCOPED_TRACE(nn::to_string(router));
    nn::MoELayerConfig config;
    config.router = router;
    config.input_dim = 6;
    config.output_dim = 4;
    config.experts = 4;
    nn::MoELayer layer(config);
    const auto out = layer->forward(torch::randn({16, 6}));
    (out.output.pow(2).sum() + out.aux_loss).backward();
    // The router learns through the combine weights (Sinkhorn's plan only dispatches).
    EXPECT_GT(layer->router_weight().grad().abs().sum().item<double>(), 0);
    int64_t counted = 0;
    for (const auto& p : layer->parameters()) counted += p.numel();
    EXPECT_EQ(counted, config.parameter_count());
  }
  // The importance loss is the squared coefficient of variation of the summed affinities.
  const auto a = torch::tensor({{0.9, 0.1}, {0.8, 0.2}, {0.7, 0.3}}, torch::kDouble);  // importance 2.4, 0.6
  EXPECT_NEAR(nn::importance_loss(a).item<double>(), (0.9 * 0.9) / (1.5 * 1.5), 1e-12);
  // Bad configurations are refused with the field named.
  nn::MoELayerConfig bad;
  bad.input_dim = 4;
  bad.output_dim = 2;
  bad.k = 9;
  EXPECT_THROW(nn::MoELayer{bad}, UsageError);
  EXPECT_THROW(nn::parse_router_kind("top-2"), UsageError);
  EXPECT_EQ(nn::parse_router_kind("sinkhorn-expert-choice"), RouterKind::SinkhornExpertChoice);
}

TEST(MoELayer, RemovingEachExpertInOnePassIsTheNaiveOracle) {
  // The naive oracle: one forward pass per expert with that expert ablated. Every router, a
  // classifier head's rows ([B, I]) and a block's tokens ([B, T, I]); float64 so that the
  // predictions (argmax) can be compared exactly, and the numbers to rounding.
  for (auto router : {RouterKind::SoftmaxTokenChoice, RouterKind::SinkhornTokenChoice, RouterKind::SoftmaxExpertChoice,
                      RouterKind::SinkhornExpertChoice, RouterKind::SparsityExpertChoice, RouterKind::SoftMoE}) {
    SCOPED_TRACE(nn::to_string(router));
    torch::manual_seed(9);
    nn::MoELayerConfig config;
    config.router = router;
    config.input_dim = 5;
    config.hidden_dim = 7;
    config.output_dim = 4;
    config.experts = 6;
    config.k = 2;
    config.group_size = 16;
    config.slots_per_expert = 2;
    nn::MoELayer layer(config);
    layer->to(torch::kDouble);
    for (const auto& x : {torch::randn({40, 5}, torch::kDouble), torch::randn({6, 7, 5}, torch::kDouble)}) {
      const auto fast = layer->outputs_without_each_expert(x);
      const int64_t tokens = x.numel() / 5;
      ASSERT_EQ(fast.sizes(), (std::vector<int64_t>{tokens, 6, 4}));
      for (int64_t e = 0; e < 6; ++e) {
        const auto naive = layer->forward(x, {e}).output.reshape({tokens, 4});
        const auto one = fast.select(1, e);
        EXPECT_LT((one - naive).abs().max().item<double>(), 1e-12) << "expert " << e;
        EXPECT_TRUE(torch::equal(one.argmax(1), naive.argmax(1))) << "expert " << e;
      }
    }
  }
}

TEST(MoELayer, ContributionsAtOneTokenAreItsOutputWithoutEachExpert) {
  // Each input one routing group (a ViT's MLP), capacity factor 0.5 so that token choice drops
  // tokens and expert choice leaves some unchosen; tie-free float64 inputs. The oracle is the
  // layer's own forward pass with the expert ablated, token `token` of every input: the
  // contributions must sum to the output there and each be the difference removing it makes.
  // Batches of 9 inputs and of one (forward's group-by-group route() path, which shares nothing
  // with the batched routing contributions_at_token uses); GELU and linear experts; two slots per
  // expert for Soft MoE.
  for (auto router : {RouterKind::SoftmaxTokenChoice, RouterKind::SinkhornTokenChoice, RouterKind::SoftmaxExpertChoice,
                      RouterKind::SinkhornExpertChoice, RouterKind::SparsityExpertChoice, RouterKind::SoftMoE})
  for (const int64_t hidden : {3, 0})
  for (const int64_t inputs : {9, 1}) {
    SCOPED_TRACE(nn::to_string(router) + ", hidden " + std::to_string(hidden) + ", inputs " + std::to_string(inputs));
    torch::manual_seed(21);
    nn::MoELayerConfig config;
    config.router = router;
    config.input_dim = 5;
    config.hidden_dim = hidden;
    config.output_dim = 4;
    config.experts = 6;
    config.k = 2;
    config.capacity_factor = 0.5;
    config.group_size = 7;
    config.slots_per_expert = 2;
    nn::MoELayer layer(config);
    layer->to(torch::kDouble);
    const auto x = torch::randn({inputs, 7, 5}, torch::kDouble);
    const auto full = layer->forward(x);
    if (nn::is_token_choice(router) && inputs > 1) {
      EXPECT_GT(full.dropped_tokens, 0) << "the test needs capacity overflow";
    }
    for (const int64_t token : {0, 4}) {
      const auto c = layer->contributions_at_token(x, token);
      ASSERT_EQ(c.sizes(), (std::vector<int64_t>{inputs, 6, 4}));
      const auto y = full.output.select(1, token);
      EXPECT_LT((c.sum(1) - y).abs().max().item<double>(), 1e-12);
      for (int64_t e = 0; e < 6; ++e) {
        const auto naive = layer->forward(x, {e}).output.select(1, token);
        EXPECT_LT((y - c.select(1, e) - naive).abs().max().item<double>(), 1e-12) << "token " << token << ", expert " << e;
        // Experts that do not take the token contribute exactly nothing.
        const auto absent = full.coefficients.select(1, token).select(1, e) == 0;
        EXPECT_EQ(c.select(1, e).index({absent}).abs().sum().item<double>(), 0.0) << "expert " << e;
      }
    }
    EXPECT_THROW(layer->contributions_at_token(x, 7), UsageError);
    EXPECT_THROW(layer->contributions_at_token(x.select(1, 0), 0), UsageError);
    if (router != RouterKind::SoftMoE) {  // token and expert choice: groups of 7 tokens, inputs of 3
      EXPECT_THROW(layer->contributions_at_token(x.slice(1, 0, 3), 0), UsageError);
    }
  }
}
