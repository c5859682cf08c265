// mumoe-router-heads: the six routers of the router study (core/nn/moe_layer.h) as classifier
// heads on a feature file, trained and measured the same way, for a first reading of issue 18's
// question (which router gives experts a person can understand) before MoE layers are part of
// the model files. For each router: train an MoE head (linear experts, k = 1, capacity factor 1,
// groups of --group tokens, Adam), then on the test features: accuracy, every expert's exact
// ablation in one pass (MoELayer::outputs_without_each_expert) → per-class accuracy drops → mean
// polysemanticity over the experts with an effect (spec §4, the same functions as `mumoe
// ablate`), class purity of each expert's tokens, load balance, dead experts, dropped tokens and
// evaluation time per token. One JSON object per router on stdout.
//
//   mumoe-router-heads TRAIN.safetensors TEST.safetensors [--experts 16] [--epochs 10]
//                      [--group 256] [--seed 0] [--routers a,b,...]
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/ablation_metrics.h"
#include "data/dataset.h"
#include "io/errors.h"
#include "nn/moe_layer.h"

using namespace mumoe;

namespace {

struct Options {
  std::string train, test;
  int64_t experts = 16, epochs = 10, group = 256;
  uint64_t seed = 0;
  std::vector<nn::RouterKind> routers = {nn::RouterKind::SoftmaxTokenChoice,  nn::RouterKind::SinkhornTokenChoice,
                                         nn::RouterKind::SoftmaxExpertChoice, nn::RouterKind::SinkhornExpertChoice,
                                         nn::RouterKind::SparsityExpertChoice, nn::RouterKind::SoftMoE};
};

Options parse(int argc, char** argv) {
  Options o;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError(a + " needs a value");
      return argv[++i];
    };
    if (a == "--experts") o.experts = std::stoll(value());
    else if (a == "--epochs") o.epochs = std::stoll(value());
    else if (a == "--group") o.group = std::stoll(value());
    else if (a == "--seed") o.seed = std::stoull(value());
    else if (a == "--routers") {
      o.routers.clear();
      std::stringstream list(value());
      for (std::string name; std::getline(list, name, ',');) o.routers.push_back(nn::parse_router_kind(name));
    } else positional.push_back(a);
  }
  if (positional.size() != 2) throw UsageError("usage: mumoe-router-heads TRAIN.safetensors TEST.safetensors [options]");
  o.train = positional[0];
  o.test = positional[1];
  return o;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::vector<int64_t> to_vector(const torch::Tensor& t) {
  const auto c = t.to(torch::kCPU, torch::kLong).contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

nlohmann::json run(const Options& o, nn::RouterKind router, const data::Dataset& train, const data::Dataset& test) {
  torch::manual_seed(o.seed);
  const int64_t classes = static_cast<int64_t>(test.class_names.size());
  nn::MoELayerConfig config;
  config.router = router;
  config.input_dim = train.features.size(1);
  config.output_dim = classes;
  config.experts = o.experts;
  config.group_size = o.group;
  nn::MoELayer head(config);
  torch::optim::Adam optimizer(head->parameters(), torch::optim::AdamOptions(1e-3));
  const auto start = std::chrono::steady_clock::now();
  const int64_t n = train.size();
  double last_loss = 0;
  for (int64_t epoch = 0; epoch < o.epochs; ++epoch) {
    const auto order = torch::randperm(n, torch::kLong);
    double total = 0;
    int64_t batches = 0;
    for (int64_t b = 0; b < n; b += o.group) {
      const auto index = order.slice(0, b, std::min(n, b + o.group));
      const auto out = head->forward(train.features.index_select(0, index));
      // The importance loss (study App. A) is what Softmax Token Choice needs to keep experts in
      // use; the other routers balance by construction and get none (aux_loss is 0 for them).
      const auto loss = torch::cross_entropy_loss(out.output, train.labels.index_select(0, index)) + 0.01 * out.aux_loss;
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      total += loss.item<double>();
      ++batches;
    }
    last_loss = total / static_cast<double>(batches);
  }
  const double train_seconds = seconds_since(start);

  torch::NoGradGuard no_grad;
  head->eval();
  const auto eval_start = std::chrono::steady_clock::now();
  const auto out = head->forward(test.features);
  const double eval_seconds = seconds_since(eval_start);
  const auto labels = to_vector(test.labels);
  const auto before = analysis::class_accuracy(labels, to_vector(out.output.argmax(1)), classes);
  // Every expert removed in turn, exactly, in one pass.
  const auto without = head->outputs_without_each_expert(test.features);  // [S, N, O]
  const auto predictions_without = without.argmax(2);                       // [S, N]
  double poly_sum = 0;
  int64_t with_effect = 0;
  for (int64_t e = 0; e < o.experts; ++e) {
    const auto after = analysis::class_accuracy(labels, to_vector(predictions_without.select(1, e)), classes);
    const auto drop = analysis::accuracy_drop(before, after);
    if (analysis::has_effect(drop)) {
      poly_sum += analysis::polysemanticity(drop);
      ++with_effect;
    }
  }
  // Load: tokens each expert received (coefficient > 0; every token for Soft MoE's dense slot
  // weights). Purity: each token counted for its strongest expert (largest coefficient; none if
  // all are 0, i.e. dropped), the share of that expert's tokens in their largest class, averaged
  // over the experts that are some token's strongest.
  const auto taken = out.coefficients > 0;  // [S, N]
  const auto load = taken.sum(0);
  const auto strongest = out.coefficients.argmax(1);
  const auto counted = std::get<0>(out.coefficients.max(1)) > 0;
  const auto onehot = torch::one_hot(test.labels, classes).to(torch::kFloat);                  // [S, C]
  const auto assignment = torch::one_hot(strongest, o.experts).to(torch::kFloat) *
                          counted.unsqueeze(1).to(torch::kFloat);                                // [S, N]
  const auto by_class = assignment.t().matmul(onehot);                                          // [N, C]
  const auto tokens_of = by_class.sum(1);
  const auto purity = (std::get<0>(by_class.max(1)) / tokens_of.clamp_min(1)).masked_select(tokens_of > 0);
  const auto load_float = load.to(torch::kDouble);
  return {{"router", nn::to_string(router)},
          {"experts", o.experts},
          {"parameters", config.parameter_count()},
          {"epochs", o.epochs},
          {"group", o.group},
          {"seed", o.seed},
          {"train_loss_last_epoch", last_loss},
          {"train_seconds", train_seconds},
          {"test_accuracy", before.overall},
          {"mean_polysemanticity", with_effect ? poly_sum / static_cast<double>(with_effect) : std::nan("")},
          {"experts_with_effect", with_effect},
          {"mean_class_purity", purity.numel() ? purity.mean().item<double>() : std::nan("")},
          {"dead_experts", (load == 0).sum().item<int64_t>()},
          {"experts_strongest_for_some_token", (tokens_of > 0).sum().item<int64_t>()},
          {"load_cv", (load_float.std(/*unbiased=*/false) / load_float.mean()).item<double>()},
          {"dropped_tokens", out.dropped_tokens},
          {"test_tokens", out.tokens},
          {"eval_microseconds_per_token", eval_seconds / static_cast<double>(out.tokens) * 1e6}};
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const auto o = parse(argc, argv);
    const auto train = data::load_dataset("features:" + o.train);
    const auto test = data::load_dataset("features:" + o.test);
    if (!train.features.defined() || !test.features.defined()) throw UsageError("both files must hold features");
    for (const auto router : o.routers) std::cout << run(o, router, train, test).dump() << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "mumoe-router-heads: " << e.what() << "\n";
    return 1;
  }
}
