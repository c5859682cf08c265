// mumoe-bench-forward: times one CP μMoE forward contraction, three ways, one way per process
// so that the peak memory (VmHWM) belongs to that way alone.
//
//   factorised    the core's cp_forward: contract a and z with their factors, then U_out (§1)
//   einsum3       the reference's 3-operand einsum 'btr,btr,or->bto' over the same factors
//                 (tokens are split into 8 sequences; --tokens must be a multiple of 8)
//   broadcast     the left-to-right order the spec warns about: multiply the three operands
//                 elementwise into a tokens × R × O intermediate, then sum over R
//   materialised  build W ∈ R^{N×(I+1)×O} from the factors, then y = Σ_n a_n W_nᵀ z'
//
// Usage: mumoe-bench-forward --method M [--tokens 512] [--input 768] [--output 768]
//                            [--experts 128] [--rank 512] [--repeats 10]
// Prints one JSON line: method, shape, median and min milliseconds, peak RSS in MiB, and the
// max abs difference from the factorised result (all three compute the same function).
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>

#include "nn/factorized_forward.h"

namespace {

long peak_rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string method;
  int64_t tokens = 512, in = 768, out = 768, experts = 128, rank = 512, repeats = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const std::string value = argv[i + 1];
    if (key == "--method") method = value;
    else if (key == "--tokens") tokens = std::stoll(value);
    else if (key == "--input") in = std::stoll(value);
    else if (key == "--output") out = std::stoll(value);
    else if (key == "--experts") experts = std::stoll(value);
    else if (key == "--rank") rank = std::stoll(value);
    else if (key == "--repeats") repeats = std::stoll(value);
    else { std::cerr << "unknown option " << key << "\n"; return 1; }
  }
  if (method != "factorised" && method != "einsum3" && method != "broadcast" && method != "materialised") {
    std::cerr << "usage: mumoe-bench-forward --method factorised|einsum3|broadcast|materialised [...]\n";
    return 1;
  }
  if (tokens % 8 != 0) {
    std::cerr << "--tokens must be a multiple of 8\n";
    return 1;
  }
  torch::manual_seed(0);
  torch::NoGradGuard no_grad;
  auto a = torch::softmax(torch::randn({tokens, experts}), -1);
  auto z = mumoe::nn::with_bias_column(torch::randn({tokens, in}));
  std::vector<torch::Tensor> factors = {torch::randn({experts, rank}), torch::randn({in + 1, rank}) / 30,
                                        torch::randn({out, rank}) / 30};
  auto reference = mumoe::nn::cp_forward(factors, {a}, z);

  auto run = [&]() -> torch::Tensor {
    if (method == "factorised") return mumoe::nn::cp_forward(factors, {a}, z);
    if (method == "einsum3") {
      // As the reference writes it, over [batch, tokens, ·] (8 sequences of tokens/8 tokens).
      auto f1 = a.matmul(factors[0]).view({8, tokens / 8, rank});
      auto f2 = z.matmul(factors[1]).view({8, tokens / 8, rank});
      return torch::einsum("btr,btr,or->bto", {f1, f2, factors[2]}).reshape({tokens, out});
    }
    if (method == "broadcast") {
      auto h = a.matmul(factors[0]) * z.matmul(factors[1]);                // [T, R]
      return (h.unsqueeze(2) * factors[2].t().unsqueeze(0)).sum(1);         // [T, R, O] → [T, O]
    }
    auto w = torch::einsum("nr,ir,or->nio", {factors[0], factors[1], factors[2]});  // [N, I+1, O]
    return torch::einsum("tn,ti,nio->to", {a, z, w});
  };
  std::vector<double> ms;
  torch::Tensor y;
  for (int64_t r = 0; r < repeats + 1; ++r) {
    const auto start = std::chrono::steady_clock::now();
    y = run();
    const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (r > 0) ms.push_back(t);  // the first run warms caches and allocators
  }
  std::sort(ms.begin(), ms.end());
  std::cout << "{\"method\":\"" << method << "\",\"tokens\":" << tokens << ",\"input\":" << in
            << ",\"output\":" << out << ",\"experts\":" << experts << ",\"rank\":" << rank
            << ",\"threads\":" << torch::get_num_threads() << ",\"median_ms\":" << ms[ms.size() / 2]
            << ",\"min_ms\":" << ms.front() << ",\"peak_rss_mib\":" << peak_rss_kib() / 1024.0
            << ",\"max_abs_diff_vs_factorised\":" << (y - reference).abs().max().item<double>() << "}\n";
  return 0;
}
