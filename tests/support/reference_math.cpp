#include "reference_math.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace mumoe::testkit {

std::vector<double> entmax15_bisect(const std::vector<double>& x) {
  const double max = *std::max_element(x.begin(), x.end());
  // Σ max(x/2 − τ, 0)² is decreasing in τ; it is ≥ 1 at τ = max/2 − 1 and 0 at τ = max/2.
  double lo = max / 2 - 1, hi = max / 2;
  auto mass = [&](double tau) {
    double s = 0;
    for (double v : x) s += std::pow(std::max(v / 2 - tau, 0.0), 2);
    return s;
  };
  for (int it = 0; it < 200; ++it) {
    const double mid = (lo + hi) / 2;
    (mass(mid) >= 1 ? lo : hi) = mid;
  }
  std::vector<double> p(x.size());
  for (size_t i = 0; i < x.size(); ++i) p[i] = std::pow(std::max(x[i] / 2 - lo, 0.0), 2);
  return p;
}

namespace {

std::vector<double> to_vector(const torch::Tensor& t) {
  auto c = t.detach().to(torch::kCPU, torch::kFloat64).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

}  // namespace

std::vector<double> materialize_weight(const std::vector<torch::Tensor>& factors,
                                       nn::Factorization f, std::vector<int64_t>& dims) {
  const size_t k = factors.size();  // E + 2
  const bool cp = f == nn::Factorization::CP;
  std::vector<std::vector<double>> data;
  dims.clear();
  for (const auto& t : factors) {
    data.push_back(to_vector(t));
    dims.push_back(cp ? t.size(0) : t.size(1));
  }
  const int64_t total = std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<>());
  std::vector<double> w(static_cast<size_t>(total));
  std::vector<int64_t> idx(k);
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t rest = flat;
    for (size_t m = k; m-- > 0;) {
      idx[m] = rest % dims[m];
      rest /= dims[m];
    }
    double value = 0;
    if (cp) {
      const int64_t rank = factors[0].size(1);
      for (int64_t r = 0; r < rank; ++r) {
        double term = 1;
        for (size_t m = 0; m < k; ++m) term *= data[m][idx[m] * rank + r];
        value += term;
      }
    } else {
      // trace(F_1[:, n_1, :] ⋯ F_k[:, idx_k, :]) with explicit small matrix products.
      const int64_t r1 = factors[0].size(0);
      std::vector<double> chain(r1 * r1, 0.0);
      for (int64_t a = 0; a < r1; ++a) chain[a * r1 + a] = 1;
      int64_t cols = r1;
      for (size_t m = 0; m < k; ++m) {
        const int64_t ra = factors[m].size(0), d = factors[m].size(1), rb = factors[m].size(2);
        std::vector<double> next(r1 * rb, 0.0);
        for (int64_t a = 0; a < r1; ++a)
          for (int64_t b = 0; b < rb; ++b)
            for (int64_t c = 0; c < ra; ++c)
              next[a * rb + b] += chain[a * cols + c] * data[m][(c * d + idx[m]) * rb + b];
        chain = std::move(next);
        cols = rb;
      }
      for (int64_t a = 0; a < r1; ++a) value += chain[a * cols + a];
    }
    w[static_cast<size_t>(flat)] = value;
  }
  return w;
}

torch::Tensor reference_layer(const std::vector<torch::Tensor>& factors, nn::Factorization f,
                              bool use_bias, const torch::Tensor& z,
                              const std::vector<torch::Tensor>& coefficients) {
  std::vector<int64_t> dims;
  const auto w = materialize_weight(factors, f, dims);
  const size_t modes = coefficients.size();
  const int64_t in = dims[modes], out = dims[modes + 1];
  const int64_t rows = z.size(0);
  int64_t experts = 1;
  for (size_t e = 0; e < modes; ++e) experts *= dims[e];
  const auto zv = to_vector(z);
  std::vector<std::vector<double>> av;
  for (const auto& a : coefficients) av.push_back(to_vector(a.reshape({rows, -1})));

  auto y = torch::zeros({rows, out}, torch::kFloat64);
  auto ya = y.accessor<double, 2>();
  const int64_t z_cols = z.size(1);
  for (int64_t m = 0; m < rows; ++m) {
    for (int64_t n = 0; n < experts; ++n) {
      double weight = 1;  // Π_e a_e[m, n_e]
      int64_t rest = n;
      for (size_t e = modes; e-- > 0;) {
        weight *= av[e][m * dims[e] + rest % dims[e]];
        rest /= dims[e];
      }
      if (weight == 0) continue;
      for (int64_t i = 0; i < in; ++i) {
        const double zi = i < z_cols ? zv[m * z_cols + i] : 1.0;  // bias row sees a 1
        if (!use_bias && i >= z_cols) continue;
        for (int64_t o = 0; o < out; ++o) ya[m][o] += weight * w[(n * in + i) * out + o] * zi;
      }
    }
  }
  return y;
}

torch::Tensor reference_block(const nn::MuMoEBlock& block, const torch::Tensor& x_in,
                              std::vector<torch::Tensor>& coefficients) {
  const auto& c = block->config();
  auto params = block->named_parameters();
  auto buffers = block->named_buffers();
  const auto x = x_in.to(torch::kFloat64);
  const int64_t rows = x.size(0), in = c.input_dim;
  const auto xv = to_vector(x);
  coefficients.clear();
  for (size_t e = 0; e < c.expert_dims.size(); ++e) {
    const int64_t n = c.expert_dims[e];
    const auto g = to_vector(params["projs." + std::to_string(e)]);
    std::vector<double> mean, var;
    if (c.gate_norm == nn::GateNorm::BatchNorm) {
      mean = to_vector(buffers["bn." + std::to_string(e) + ".running_mean"]);
      var = to_vector(buffers["bn." + std::to_string(e) + ".running_var"]);
    }
    auto a = torch::zeros({rows, n}, torch::kFloat64);
    for (int64_t m = 0; m < rows; ++m) {
      std::vector<double> s(n, 0.0);
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < in; ++i) s[j] += xv[m * in + i] * g[i * n + j];
      if (c.gate_norm == nn::GateNorm::BatchNorm) {
        for (int64_t j = 0; j < n; ++j) s[j] = (s[j] - mean[j]) / std::sqrt(var[j] + c.norm_eps);
      } else if (c.gate_norm == nn::GateNorm::LayerNorm) {
        double mu = 0, v = 0;
        for (double s_j : s) mu += s_j / n;
        for (double s_j : s) v += (s_j - mu) * (s_j - mu) / n;
        for (auto& s_j : s) s_j = (s_j - mu) / std::sqrt(v + c.norm_eps);
      }
      std::vector<double> p;
      if (c.gate_activation == nn::GateActivationKind::Entmax15) {
        p = entmax15_bisect(s);
      } else {
        const double mx = *std::max_element(s.begin(), s.end());
        double sum = 0;
        for (double s_j : s) sum += std::exp(s_j - mx);
        for (double s_j : s) p.push_back(std::exp(s_j - mx) / sum);
      }
      for (int64_t j = 0; j < n; ++j) a[m][j] = p[j];
    }
    coefficients.push_back(a);
  }
  auto z = x.clone();
  if (c.input_layer_norm) {
    const auto w = to_vector(params["input_ln.weight"]), b = to_vector(params["input_ln.bias"]);
    auto za = z.accessor<double, 2>();
    for (int64_t m = 0; m < rows; ++m) {
      double mu = 0, v = 0;
      for (int64_t i = 0; i < in; ++i) mu += za[m][i] / in;
      for (int64_t i = 0; i < in; ++i) v += (za[m][i] - mu) * (za[m][i] - mu) / in;
      for (int64_t i = 0; i < in; ++i) za[m][i] = (za[m][i] - mu) / std::sqrt(v + c.norm_eps) * w[i] + b[i];
    }
  }
  auto y = reference_layer(block->first_layer()->factors(), c.factorization, c.use_bias, z, coefficients);
  if (c.is_block()) {
    auto ya = y.accessor<double, 2>();
    for (int64_t m = 0; m < y.size(0); ++m)
      for (int64_t o = 0; o < y.size(1); ++o) ya[m][o] = 0.5 * ya[m][o] * (1 + std::erf(ya[m][o] / std::sqrt(2.0)));
    y = reference_layer(block->second_layer()->factors(), c.factorization, c.use_bias, y, coefficients);
  }
  return y;
}

void randomize(nn::MuMoEBlock& block, uint64_t seed) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(seed);
  for (auto& p : block->named_parameters()) p.value().normal_(0.0, 0.7);
  for (auto& b : block->named_buffers()) {
    if (b.key().find("running_mean") != std::string::npos) b.value().normal_(0.0, 0.3);
    if (b.key().find("running_var") != std::string::npos) b.value().uniform_(0.5, 2.0);
  }
}

double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  auto a64 = a.detach().to(torch::kFloat64), b64 = b.detach().to(torch::kFloat64);
  return ((a64 - b64).norm() / b64.norm()).item<double>();
}

}  // namespace mumoe::testkit
