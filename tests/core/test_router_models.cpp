// Sparse and soft MoE layers (nn/moe_layer.h) as model files and under analysis: a router head
// written by ClassifierModel::save loads back with the same outputs; the analysis session
// extracts it in whole routing groups; its galleries' coefficients, predictions, dropped
// samples, single-expert and set ablations and the sweep equal what this test computes itself
// by evaluating the layer group by group (with the experts removed: the naive oracle); and the
// comparison row's purity, I(E;Y)/H(Y), load CV and dead experts equal brute-force loops.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>

#include "analysis/analysis_session.h"
#include "analysis/layer_comparison.h"
#include "expect_file_error.h"
#include "io/errors.h"
#include "io/safetensors.h"
#include "model/classifier_model.h"
#include "model/model_file.h"
#include "temp_dir.h"

using namespace mumoe;

namespace {

constexpr int64_t kSamples = 300, kInput = 10, kClasses = 4, kGroup = 32;

nn::MoELayer random_head(nn::RouterKind router, int64_t experts, uint64_t seed) {
  nn::MoELayerConfig c;
  c.router = router;
  c.input_dim = kInput;
  c.output_dim = kClasses;
  c.experts = experts;
  c.group_size = kGroup;
  c.capacity_factor = 0.75;  // capacity-limited routers drop some samples
  torch::manual_seed(seed);
  nn::MoELayer head(c);
  {
    // Larger router weights give decided routing, as trained routers have.
    torch::NoGradGuard no_grad;
    head->router_weight().mul_(4.0);
  }
  head->eval();
  return head;
}

/// The layer on `x` one routing group (kGroup rows) at a time, float64, with `ablated` removed.
nn::MoEOutput by_groups(const nn::MoELayer& layer, const torch::Tensor& x, const std::vector<int64_t>& ablated = {}) {
  torch::NoGradGuard no_grad;
  auto copy = nn::copy_moe_layer(layer, torch::kFloat64, torch::kCPU);
  std::vector<torch::Tensor> outputs, coefficients;
  int64_t dropped = 0;
  for (int64_t b = 0; b < x.size(0); b += kGroup) {
    auto out = copy->forward(x.slice(0, b, std::min(x.size(0), b + kGroup)).to(torch::kFloat64), ablated);
    outputs.push_back(out.output);
    coefficients.push_back(out.coefficients);
    dropped += out.dropped_tokens;
  }
  nn::MoEOutput all;
  all.output = torch::cat(outputs);
  all.coefficients = torch::cat(coefficients);
  all.dropped_tokens = dropped;
  return all;
}

double accuracy(const torch::Tensor& predictions, const torch::Tensor& labels) {
  int64_t correct = 0;
  for (int64_t s = 0; s < labels.size(0); ++s) correct += predictions[s].item<int64_t>() == labels[s].item<int64_t>();
  return static_cast<double>(correct) / static_cast<double>(labels.size(0));
}

class RouterHead : public ::testing::TestWithParam<nn::RouterKind> {
 protected:
  void SetUp() override {
    head_ = random_head(GetParam(), 6, 11);
    model_path_ = dir_.file("head.safetensors");
    model::ClassifierModel::from_router_layer(head_, "head", {"a", "b", "c", "d"}).save(model_path_, {});
    torch::manual_seed(5);
    features_ = torch::randn({kSamples, kInput});
    // Labels mostly the head's own predictions, so accuracies are high and removals show.
    const auto predicted = by_groups(head_, features_).output.argmax(1);
    const auto noisy = torch::rand({kSamples}) < 0.2;
    labels_ = torch::where(noisy, torch::randint(kClasses, {kSamples}, torch::kLong), predicted);
    features_path_ = dir_.file("features.safetensors");
    io::write_safetensors(features_path_, {{"features", features_}, {"labels", labels_}},
                          {{"mumoe.class_names", R"(["a","b","c","d"])"}});
    options_.model_path = model_path_;
    options_.data_spec = "features:" + features_path_;
    options_.cache_path = dir_.file("cache.sqlite");
    options_.chunk_size = 50;  // rounded up to whole groups: 64
  }

  testkit::TempDir dir_;
  nn::MoELayer head_{nullptr};
  std::string model_path_, features_path_;
  torch::Tensor features_, labels_;
  analysis::SessionOptions options_;
};

TEST_P(RouterHead, ModelFileRoundTripsAndRefusesMuMoEOnlyUses) {
  const auto file = model::ModelFile::load(model_path_);
  ASSERT_EQ(file.manifest().layers.size(), 1u);
  const auto& layer = file.manifest().layers[0];
  ASSERT_TRUE(layer.is_router());
  EXPECT_EQ(layer.router->router, GetParam());
  EXPECT_EQ(layer.router->group_size, kGroup);
  EXPECT_EQ(layer.experts(), 6);
  EXPECT_EQ(layer.parameter_count(), head_->config().parameter_count());

  auto model = model::ClassifierModel::load(file);
  ASSERT_TRUE(model.is_router());
  EXPECT_EQ(model.class_count(), kClasses);
  EXPECT_EQ(model.aligned_batch(50), 64);
  const auto expected = by_groups(head_, features_).output;
  const auto reloaded = by_groups(model.router_layer(), features_).output;
  EXPECT_TRUE(torch::equal(expected, reloaded));
  // The μMoE-only paths say what the layer is instead of misreading it.
  try {
    model.layer();
    FAIL() << "layer() accepted a router layer";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(nn::display_name(GetParam())), std::string::npos) << e.what();
  }
  EXPECT_THROW(file.build_layer("head"), UsageError);
}

TEST_P(RouterHead, AnalysisEqualsTheLayerEvaluatedGroupByGroup) {
  auto session = analysis::AnalysisSession::open_extracted(options_);
  const auto& run = session->run();
  EXPECT_EQ(run.info.chunk_size, 64);
  EXPECT_EQ(session->expert_dims(), std::vector<int64_t>{6});
  EXPECT_EQ(session->layer_family(), nn::display_name(GetParam()));

  const auto reference = by_groups(head_, features_);
  const auto predictions = reference.output.argmax(1);
  for (int64_t s = 0; s < kSamples; ++s) {
    ASSERT_EQ(run.predictions[s], predictions[s].item<int64_t>()) << "sample " << s;
    const auto dense = analysis::dense_coefficients(run, 0, s);
    for (int64_t e = 0; e < 6; ++e) ASSERT_EQ(dense[e], reference.coefficients[s][e].item<double>()) << s << "," << e;
  }
  EXPECT_DOUBLE_EQ(session->accuracy().overall, accuracy(predictions, labels_));

  // Single experts, a set, and the sweep: sparse and naive methods against the oracle here.
  for (const std::vector<int64_t>& experts : {std::vector<int64_t>{0}, {3}, {1, 4}}) {
    const auto oracle = by_groups(head_, features_, experts).output.argmax(1);
    for (const auto method : {analysis::AblationMethod::Sparse, analysis::AblationMethod::Naive}) {
      const auto outcome = session->ablate(0, experts, method).value;
      EXPECT_DOUBLE_EQ(outcome.after.overall, accuracy(oracle, labels_)) << analysis::to_string(method);
      int64_t changed = 0;
      for (int64_t s = 0; s < kSamples; ++s) changed += oracle[s].item<int64_t>() != predictions[s].item<int64_t>();
      EXPECT_EQ(outcome.changed_predictions, changed);
      if (experts.size() == 2) {
        EXPECT_GT(changed, 0) << "the removals must change something to test anything";
      }
    }
  }
  const auto sparse = session->sweep(0, analysis::AblationMethod::Sparse).value;
  const auto naive = session->sweep(0, analysis::AblationMethod::Naive).value;
  ASSERT_EQ(sparse.experts.size(), 6u);
  for (int64_t e = 0; e < 6; ++e) {
    const auto oracle = by_groups(head_, features_, {e}).output.argmax(1);
    EXPECT_EQ(sparse.experts[e].after.correct, naive.experts[e].after.correct) << "expert " << e;
    EXPECT_DOUBLE_EQ(sparse.experts[e].after.overall, accuracy(oracle, labels_)) << "expert " << e;
  }
  EXPECT_THROW(session->ablate(1, {0}, analysis::AblationMethod::Sparse), UsageError);
  EXPECT_THROW(session->ablate(0, {6}, analysis::AblationMethod::Sparse), UsageError);
}

TEST_P(RouterHead, ComparisonRowEqualsBruteForce) {
  const auto row = analysis::compare_layer(options_);
  const auto reference = by_groups(head_, features_);
  EXPECT_EQ(row.family, nn::display_name(GetParam()));
  EXPECT_EQ(row.experts, 6);
  EXPECT_EQ(row.samples, kSamples);
  EXPECT_EQ(row.parameters, head_->config().parameter_count());

  // Strongest expert per sample (lowest index on ties), none when every coefficient is 0.
  std::map<int64_t, std::map<int64_t, int64_t>> by_expert;  // expert → class → samples
  std::vector<int64_t> strongest_for(6, 0), support(6, 0);
  int64_t dropped = 0, routed = 0;
  std::map<int64_t, int64_t> classes;
  for (int64_t s = 0; s < kSamples; ++s) {
    int64_t best = -1;
    double best_value = 0;
    for (int64_t e = 0; e < 6; ++e) {
      const double v = reference.coefficients[s][e].item<double>();
      support[e] += v > 0;
      if (v > best_value) best_value = v, best = e;
    }
    if (best < 0) {
      ++dropped;
      continue;
    }
    ++routed;
    ++strongest_for[best];
    ++by_expert[best][labels_[s].item<int64_t>()];
    ++classes[labels_[s].item<int64_t>()];
  }
  EXPECT_EQ(row.dropped_tokens, dropped);
  // Capacity factor 0.75: capacity-limited routers drop samples; Soft MoE never does.
  if (GetParam() == nn::RouterKind::SoftMoE) EXPECT_EQ(dropped, 0);
  else EXPECT_GT(dropped, 0);
  EXPECT_EQ(row.dropped_tokens, reference.dropped_tokens);
  double purity = 0, mutual = 0, class_entropy = 0;
  for (const auto& [e, counts] : by_expert) {
    int64_t total = 0, largest = 0;
    for (const auto& [c, n] : counts) total += n, largest = std::max(largest, n);
    purity += static_cast<double>(largest) / static_cast<double>(total);
    for (const auto& [c, n] : counts) {
      const double joint = static_cast<double>(n) / routed;
      mutual += joint * std::log2(joint / (static_cast<double>(total) / routed * classes[c] / routed));
    }
  }
  for (const auto& [c, n] : classes) class_entropy -= static_cast<double>(n) / routed * std::log2(static_cast<double>(n) / routed);
  EXPECT_NEAR(row.mean_class_purity, purity / static_cast<double>(by_expert.size()), 1e-12);
  EXPECT_NEAR(row.information_ratio, mutual / class_entropy, 1e-9);
  double mean = 0, variance = 0;
  for (const auto n : strongest_for) mean += n / 6.0;
  for (const auto n : strongest_for) variance += (n - mean) * (n - mean) / 6.0;
  EXPECT_NEAR(row.load_cv, std::sqrt(variance) / mean, 1e-12);
  int64_t dead = 0;
  for (const auto n : support) dead += n == 0;
  EXPECT_EQ(row.dead_experts, dead);
  EXPECT_GT(row.multiply_adds_per_sample, 0);
  EXPECT_GT(row.microseconds_per_sample, 0);
  EXPECT_FALSE(row.from_cache);
  // A second call reads extraction and sweep back.
  EXPECT_TRUE(analysis::compare_layer(options_).from_cache);
  // JSON round trip (the CLI's output, the page's rows).
  const auto back = analysis::layer_comparison_from_json(analysis::to_json(row));
  EXPECT_EQ(back.family, row.family);
  EXPECT_EQ(back.dropped_tokens, row.dropped_tokens);
  EXPECT_DOUBLE_EQ(back.mean_class_purity, row.mean_class_purity);
}

INSTANTIATE_TEST_SUITE_P(AllRouters, RouterHead,
                         ::testing::Values(nn::RouterKind::SoftmaxTokenChoice, nn::RouterKind::SinkhornTokenChoice,
                                           nn::RouterKind::SoftmaxExpertChoice, nn::RouterKind::SinkhornExpertChoice,
                                           nn::RouterKind::SparsityExpertChoice, nn::RouterKind::SoftMoE),
                         [](const ::testing::TestParamInfo<nn::RouterKind>& info) {
                           auto name = nn::to_string(info.param);
                           for (auto& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

TEST(RouterManifest, BadRouterConfigIsAFileErrorNamingTheField) {
  testkit::TempDir dir;
  const auto path = dir.file("bad.safetensors");
  model::Manifest m;
  model::ModelLayer layer;
  layer.name = "head";
  layer.prefix = "head.";
  layer.router = random_head(nn::RouterKind::SoftMoE, 4, 1)->config();
  m.layers = {layer};
  auto tensors = model::layer_tensors(layer, random_head(nn::RouterKind::SoftMoE, 4, 1));
  // A router of the wrong shape: named with its tensor.
  tensors[0].tensor = torch::zeros({3, 3});
  model::save_model_file(path, m, tensors);
  testkit::expect_file_error([&] { model::ModelFile::load(path); }, path, "head.router");
  // An unknown router name in the manifest.
  auto json = model::to_json(m);
  json["layers"][0]["router_config"]["router"] = "top-3-magic";
  testkit::expect_file_error([&] { model::manifest_from_json(json, path); }, path, "unknown router");
}

}  // namespace
