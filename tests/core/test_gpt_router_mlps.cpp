// A GPT whose MLP blocks are router layers (nn::GptConfig::router_mlp) against independent
// computations: the whole model against a transcription of the study's Algorithm 1 (k = 1,
// tokens in order, a token past its expert's buffer dropped) written as a loop over tokens with
// the LayerNorm, softmax and GELU spelled out; causality (a prefix's logits are the full
// sequence's, whatever follows); the refusal of the routers that read later tokens; the model
// file round trip; the text analysis engine — sparse ablation, the naive oracle (expert n's
// output layer zeroed) and the GPT's own combine-weight ablation agreeing token for token — and
// extraction's coefficients; training with the load-balancing loss.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "analysis/lm_ablation.h"
#include "analysis/lm_eval_set.h"
#include "analysis/text_analysis_session.h"
#include "io/errors.h"
#include "model/gpt_file.h"
#include "model/model_file.h"
#include "nn/mumoe_gpt.h"
#include "temp_dir.h"
#include "train/lm_training.h"

using namespace mumoe;

namespace gpt_router_mlps_test {

constexpr int64_t kVocab = 7, kContext = 8, kExperts = 4, kHidden = 6, kWidth = 8;

nn::GptConfig router_config(double capacity_factor, int64_t layers = 2) {
  nn::GptConfig c;
  c.vocab_size = kVocab;
  c.block_size = kContext;
  c.n_layer = layers;
  c.n_head = 2;
  c.n_embd = kWidth;
  c.experts = kExperts;
  c.dropout = 0;
  c.router_mlp = nn::gpt_router_mlp_config(nn::RouterKind::SoftmaxTokenChoice, kWidth, kContext, kExperts, kHidden,
                                           capacity_factor);
  return c;
}

// Random values everywhere, so that tokens disagree about experts and every parameter matters;
// float64, eval mode.
nn::MuMoEGpt random_router_gpt(double capacity_factor, uint64_t seed, int64_t layers = 2) {
  torch::manual_seed(seed);
  nn::MuMoEGpt gpt(router_config(capacity_factor, layers));
  {
    torch::NoGradGuard no_grad;
    for (auto& p : gpt->named_parameters()) p.value().normal_(0.0, 0.6);
  }
  gpt->to(torch::kFloat64);
  gpt->eval();
  return gpt;
}

torch::Tensor random_ids(int64_t batch, int64_t length, uint64_t seed) {
  torch::manual_seed(seed);
  return torch::randint(0, kVocab, {batch, length}, torch::kLong);
}

struct BruteForceMlp {
  torch::Tensor output;        // [B, T, C]
  torch::Tensor coefficients;  // [B, T, n]
  int64_t dropped = 0;
};

// Block `block`'s router MLP on its residual stream h [B, T, C] (float64), token by token:
// z = LayerNorm(h_t) (ln_2, eps 1e-5), a = softmax(z W); each sequence's tokens in order, the
// expert e with the largest a (ties: lower index) takes the token while it has fewer than
// `capacity` tokens, and then y_t = a_e · (GELU(z W1_e + b1_e) W2_e + b2_e); otherwise y_t = 0
// (dropped). Experts in `ablated` keep their slots but contribute nothing.
BruteForceMlp brute_force_mlp(const nn::GptBlock& block, const torch::Tensor& h, int64_t capacity,
                              const std::set<int64_t>& ablated = {}) {
  auto params = block->router_mlp()->named_parameters(false);
  const auto w = params["router"], w1 = params["experts_w1"], b1 = params["experts_b1"];
  const auto w2 = params["experts_w2"], b2 = params["experts_b2"];
  const auto gamma = block->ln_2()->weight, beta = block->ln_2()->bias;
  const int64_t batch = h.size(0), tokens = h.size(1), width = h.size(2);
  BruteForceMlp out{torch::zeros_like(h), torch::zeros({batch, tokens, kExperts}, h.options()), 0};
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<int64_t> taken(kExperts, 0);
    for (int64_t t = 0; t < tokens; ++t) {
      const auto x = h[b][t];
      double mean = 0, var = 0;
      for (int64_t i = 0; i < width; ++i) mean += x[i].item<double>() / width;
      for (int64_t i = 0; i < width; ++i) var += std::pow(x[i].item<double>() - mean, 2) / width;
      auto z = torch::zeros({width}, h.options());
      for (int64_t i = 0; i < width; ++i)
        z[i] = (x[i].item<double>() - mean) / std::sqrt(var + 1e-5) * gamma[i].item<double>() + beta[i].item<double>();
      std::vector<double> logits(kExperts, 0.0);
      for (int64_t e = 0; e < kExperts; ++e)
        for (int64_t i = 0; i < width; ++i) logits[e] += z[i].item<double>() * w[i][e].item<double>();
      double top = logits[0], total = 0;
      for (double l : logits) top = std::max(top, l);
      for (double l : logits) total += std::exp(l - top);
      int64_t chosen = 0;
      for (int64_t e = 1; e < kExperts; ++e)
        if (logits[e] > logits[chosen]) chosen = e;
      if (taken[chosen] >= capacity) {
        ++out.dropped;
        continue;
      }
      ++taken[chosen];
      if (ablated.count(chosen)) continue;
      const double a = std::exp(logits[chosen] - top) / total;
      out.coefficients[b][t][chosen] = a;
      for (int64_t o = 0; o < width; ++o) {
        double y = b2[chosen][o].item<double>();
        for (int64_t j = 0; j < kHidden; ++j) {
          double pre = b1[chosen][j].item<double>();
          for (int64_t i = 0; i < width; ++i) pre += z[i].item<double>() * w1[chosen][i][j].item<double>();
          const double gelu = 0.5 * pre * (1.0 + std::erf(pre / std::sqrt(2.0)));
          y += gelu * w2[chosen][j][o].item<double>();
        }
        out.output[b][t][o] = a * y;
      }
    }
  }
  return out;
}

struct BruteForceModel {
  torch::Tensor logits;
  std::vector<torch::Tensor> coefficients;
  int64_t dropped = 0;
  std::vector<int64_t> dropped_per_layer;
  /// Per layer, on the same residual stream: the block's own MLP's dropped tokens.
  std::vector<int64_t> model_dropped_per_layer;
  /// The importance loss (study App. A) from its definition: per sequence, the squared
  /// coefficient of variation of Σ_t softmax(ln_2(h_t) W); averaged over sequences, then layers.
  double importance_loss = 0;
};

// The whole GPT with each MLP block from brute_force_mlp (attention and the LayerNorms around it
// are the modules' own: their arithmetic is checked in test_gpt.cpp).
BruteForceModel brute_force_model(nn::MuMoEGpt& gpt, const torch::Tensor& ids, int64_t capacity,
                                  int64_t ablated_layer = -1, const std::set<int64_t>& ablated = {}) {
  torch::NoGradGuard no_grad;
  const auto positions = torch::arange(ids.size(1), torch::kLong);
  auto x = gpt->wte()->forward(ids) + gpt->wpe()->forward(positions);
  BruteForceModel m;
  for (int64_t l = 0; l < gpt->n_layer(); ++l) {
    auto block = gpt->block(l);
    const auto h = block->attention_residual(x);
    const auto mlp = brute_force_mlp(block, h, capacity, l == ablated_layer ? ablated : std::set<int64_t>{});
    x = h + mlp.output;
    m.coefficients.push_back(mlp.coefficients);
    m.dropped += mlp.dropped;
    m.dropped_per_layer.push_back(mlp.dropped);
    m.model_dropped_per_layer.push_back(block->mlp_branch(h).dropped_tokens);
    const auto z = torch::layer_norm(h, {h.size(2)}, block->ln_2()->weight, block->ln_2()->bias, 1e-5);
    const auto importance = torch::softmax(z.matmul(block->router_mlp()->router_weight()), -1).sum(1);  // [B, n]
    const auto cv2 = importance.var(1, /*unbiased=*/false) / importance.mean(1).pow(2);
    m.importance_loss += cv2.mean().item<double>() / static_cast<double>(gpt->n_layer());
  }
  m.logits = torch::nn::functional::linear(gpt->ln_f()->forward(x), gpt->wte()->weight);
  return m;
}

TEST(GptRouterMlps, ForwardEqualsAlgorithmOneTokenByToken) {
  // c = 0.5: one slot per expert per 8-token sequence, so at least half of every sequence is
  // dropped; c = 1.5: three slots, overflow only where routing is unbalanced.
  for (const double c : {0.5, 1.5}) {
    auto gpt = random_router_gpt(c, 5);
    const int64_t capacity = static_cast<int64_t>(std::ceil(c * kContext / kExperts));
    for (const int64_t length : {kContext, int64_t{5}}) {
      const auto ids = random_ids(3, length, 17);
      torch::NoGradGuard no_grad;
      const auto out = gpt->forward(ids);
      const auto brute = brute_force_model(gpt, ids, capacity);
      const std::string what = "c " + std::to_string(c) + ", T " + std::to_string(length);
      ASSERT_TRUE(torch::allclose(out.logits, brute.logits, 1e-10, 1e-10)) << what;
      for (int64_t l = 0; l < gpt->n_layer(); ++l) {
        ASSERT_TRUE(torch::allclose(out.coefficients[l], brute.coefficients[l], 1e-12, 1e-12)) << what << " layer " << l;
        EXPECT_EQ(brute.model_dropped_per_layer[l], brute.dropped_per_layer[l]) << what << " layer " << l;
      }
      EXPECT_NEAR(out.aux_loss.item<double>(), brute.importance_loss, 1e-9) << what;
      if (c == 0.5) {
        EXPECT_GE(brute.dropped, 2 * 3 * (length - kExperts)) << what;
      }
    }
  }
}

TEST(GptRouterMlps, IsCausalWhateverFollows) {
  auto gpt = random_router_gpt(1.0, 8);
  torch::NoGradGuard no_grad;
  const auto ids = random_ids(2, kContext, 23);
  const auto full = gpt->forward(ids).logits;
  for (int64_t t = 1; t < kContext; ++t) {
    const auto prefix = gpt->forward(ids.slice(1, 0, t)).logits;
    ASSERT_TRUE(torch::allclose(prefix, full.slice(1, 0, t), 1e-12, 1e-12)) << "prefix of " << t;
    // Other tokens after position t leave positions ≤ t alone.
    auto changed = ids.clone();
    changed.slice(1, t + 1) = (changed.slice(1, t + 1) + 1) % kVocab;
    const auto other = gpt->forward(changed).logits;
    ASSERT_TRUE(torch::allclose(other.slice(1, 0, t + 1), full.slice(1, 0, t + 1), 1e-12, 1e-12)) << t;
  }
  // Nor does another sequence in the batch (each sequence is its own routing group).
  const auto alone = gpt->forward(ids.slice(0, 1, 2)).logits;
  EXPECT_TRUE(torch::allclose(alone, full.slice(0, 1, 2), 1e-12, 1e-12));
}

TEST(GptRouterMlps, RoutersThatReadLaterTokensAreRefused) {
  for (const auto kind : {nn::RouterKind::SinkhornTokenChoice, nn::RouterKind::SoftmaxExpertChoice,
                          nn::RouterKind::SinkhornExpertChoice, nn::RouterKind::SparsityExpertChoice,
                          nn::RouterKind::SoftMoE}) {
    try {
      nn::gpt_router_mlp_config(kind, kWidth, kContext, kExperts, kHidden);
      ADD_FAILURE() << nn::to_string(kind) << " was accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("not causal"), std::string::npos) << e.what();
    }
  }
  auto c = router_config(1.0);
  c.router_mlp->k = 2;
  EXPECT_THROW(c.validate(), UsageError);
  c = router_config(1.0);
  c.router_mlp->sequence_groups = false;
  EXPECT_THROW(c.validate(), UsageError);
  c = router_config(1.0);
  c.router_mlp->group_size = kContext + 1;  // buffers not those of the GPT's context
  EXPECT_THROW(c.validate(), UsageError);
  c = router_config(1.0);
  c.router_mlp->experts = kExperts + 1;
  EXPECT_THROW(c.validate(), UsageError);
  // The json names the MLP kind; the router configuration travels with the manifest's layers.
  const auto good = router_config(1.0);
  const auto json = nn::to_json(good);
  EXPECT_EQ(json.at("mlp"), "router");
  EXPECT_THROW(nn::gpt_config_from_json(json), UsageError);
  EXPECT_EQ(nn::to_json(nn::gpt_config_from_json(json, good.router_mlp)), json);
  nn::GptConfig mumoe_gpt;
  EXPECT_THROW(nn::gpt_config_from_json(nn::to_json(mumoe_gpt), good.router_mlp), UsageError);
}

TEST(GptRouterMlps, ModelFileRoundTripAndKeys) {
  testkit::TempDir dir;
  torch::manual_seed(3);
  nn::MuMoEGpt gpt(router_config(1.0));
  gpt->eval();
  std::set<std::string> keys;
  for (const auto& t : model::gpt_state_dict(gpt)) keys.insert(t.name);
  for (const char* key : {"transformer.h.1.ln_2.weight", "transformer.h.1.mlp.router", "transformer.h.1.mlp.experts_w1",
                          "transformer.h.1.mlp.experts_b2", "lm_head.weight"})
    EXPECT_TRUE(keys.count(key)) << key;
  const auto path = dir.file("router-gpt.safetensors");
  model::save_gpt(path, gpt, model::gpt_manifest(gpt, {{"seed", 0}}));
  const auto file = model::ModelFile::load(path);
  ASSERT_EQ(file.manifest().layers.size(), 2u);
  EXPECT_EQ(file.manifest().layers[1].name, "transformer.h.1.mlp");
  EXPECT_EQ(file.manifest().layers[1].family(), "Softmax Token Choice");
  auto loaded = model::load_gpt(file);
  ASSERT_TRUE(loaded->config().router_mlp.has_value());
  EXPECT_TRUE(loaded->config().router_mlp->sequence_groups);
  const auto ids = random_ids(2, kContext, 4);
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(loaded->forward(ids).logits, gpt->forward(ids).logits));
}

TEST(GptRouterMlps, AFileWithANonCausalOrMismatchedRouterIsAFileError) {
  testkit::TempDir dir;
  torch::manual_seed(3);
  nn::MuMoEGpt gpt(router_config(1.0));
  const auto tensors = model::gpt_state_dict(gpt);
  auto expect_file_error = [&](const model::Manifest& manifest, const std::string& name, const std::string& words) {
    const auto path = dir.file(name);
    model::save_model_file(path, manifest, tensors);
    try {
      model::load_gpt(model::ModelFile::load(path));
      ADD_FAILURE() << name << " loaded";
    } catch (const FileError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  // A hand-edited file whose MLPs claim Soft MoE (same tensor shapes): refused, with the reason.
  auto soft = model::gpt_manifest(gpt, {{"seed", 0}});
  for (auto& layer : soft.layers) layer.router->router = nn::RouterKind::SoftMoE;
  expect_file_error(soft, "soft.safetensors", "not causal");
  // Layers that disagree: block 1 with another capacity factor than block 0.
  auto mixed = model::gpt_manifest(gpt, {{"seed", 0}});
  mixed.layers[1].router->capacity_factor = 2.0;
  expect_file_error(mixed, "mixed.safetensors", "transformer.h.1.mlp");
}

TEST(GptRouterMlps, LoadBalancingLossReachesTheRouterInTraining) {
  std::vector<int32_t> corpus;
  for (int i = 0; i < 400; ++i) corpus.push_back(static_cast<int32_t>(i % 3));
  auto train_with = [&](double aux_weight, int64_t steps, int64_t width = kWidth) {
    torch::manual_seed(2);
    auto config = router_config(1.0, 1);
    config.n_embd = width;
    config.router_mlp = nn::gpt_router_mlp_config(nn::RouterKind::SoftmaxTokenChoice, width, kContext, kExperts,
                                                  3 * width, 1.0);
    nn::MuMoEGpt gpt(config);
    train::LmTrainOptions o;
    o.steps = steps;
    o.batch_size = 8;
    o.learning_rate = 1e-2;
    o.warmup_steps = 2;
    o.aux_loss_weight = aux_weight;
    const auto result = train::train_lm(gpt, corpus, o);
    return std::make_pair(gpt, result);
  };
  auto [without, r0] = train_with(0.0, 1);
  auto [with, r1] = train_with(1.0, 1);
  // The reported loss is the cross-entropy alone, equal for both on the first step.
  EXPECT_DOUBLE_EQ(r0.losses.front(), r1.losses.front());
  // The importance loss has a gradient of its own at the router (GptOutput::aux_loss, its value
  // checked against the definition in ForwardEqualsAlgorithmOneTokenByToken).
  {
    torch::manual_seed(4);
    nn::MuMoEGpt gpt(router_config(1.0, 1));
    const auto ids = random_ids(4, kContext, 6), targets = random_ids(4, kContext, 7);
    auto router_gradient = [&](double aux_weight) {
      gpt->zero_grad();
      const auto out = gpt->forward(ids);
      const auto loss = torch::cross_entropy_loss(out.logits.reshape({-1, kVocab}), targets.reshape({-1}));
      (loss + aux_weight * out.aux_loss).backward();
      return gpt->block(0)->router_mlp()->router_weight().grad().clone();
    };
    const auto cross_entropy_only = router_gradient(0.0), with_importance = router_gradient(1.0);
    EXPECT_GT(cross_entropy_only.abs().sum().item<double>(), 0);
    EXPECT_GT((with_importance - cross_entropy_only).abs().max().item<double>(), 1e-6);
  }
  // And it learns: the next token of a period-3 corpus is determined by the current one (ln 3 =
  // 1.10 would be the unigram distribution). Width 32: at widths 8 and 16 this seed stays at the
  // unigram loss for 200 steps (with or without the importance loss, dropped tokens or weight
  // decay; gradients reach every parameter), where a μMoE GPT of width 8 learns the corpus.
  auto [trained, r] = train_with(0.01, 200, 32);
  EXPECT_GT(r.losses.front(), 1.8);  // ≈ ln 7 at initialisation
  EXPECT_LT(train::evaluate_lm(trained, corpus).mean_loss, 0.1);
}

// 24 sequences of 8 random ids in 3 documents.
analysis::LmEvalSet eval_set() {
  torch::manual_seed(99);
  const auto ids = torch::randint(kVocab, {24 * kContext + 1}, torch::kLong);
  std::vector<int32_t> stream;
  for (int64_t k = 0; k < ids.numel(); ++k) stream.push_back(static_cast<int32_t>(ids[k].item<int64_t>()));
  return analysis::make_lm_eval_set(stream, {0, 50, 120}, kContext, 24, "test");
}

TEST(GptRouterMlps, SparseAblationEqualsTheOracleAndTheGptsOwn) {
  auto gpt = random_router_gpt(1.0, 12, 3);
  const auto set = eval_set();
  const auto ids = torch::tensor(std::vector<int64_t>(set.stream.begin(), set.stream.begin() + set.tokens()))
                       .view({set.sequences, kContext});
  const int64_t capacity = 2;  // ceil(1.0 · 8 / 4)
  int64_t changed = 0, skipped_sequences = 0;
  for (int64_t layer = 0; layer < gpt->n_layer(); ++layer) {
    analysis::LmAblation engine(gpt, set, layer);
    // The baseline's coefficients are Algorithm 1's.
    const auto base = brute_force_model(gpt, ids, capacity);
    ASSERT_TRUE(torch::allclose(engine.coefficients(), base.coefficients[layer].reshape({-1, kExperts}), 1e-12, 1e-12));
    for (int64_t e = 0; e < kExperts; ++e) {
      const auto sparse = engine.after({e}, analysis::AblationMethod::Sparse);
      const auto naive = engine.after({e}, analysis::AblationMethod::Naive);
      // The GPT's own ablation (combine weights 0) and the brute force with the expert silent.
      std::vector<nn::ExpertAblation> ablation(static_cast<size_t>(layer + 1));
      ablation[static_cast<size_t>(layer)] = nn::ExpertAblation::first_mode({e});
      torch::NoGradGuard no_grad;
      const auto own = gpt->forward(ids, ablation).logits.reshape({-1, kVocab});
      const auto brute = brute_force_model(gpt, ids, capacity, layer, {e}).logits.reshape({-1, kVocab});
      ASSERT_TRUE(torch::allclose(own, brute, 1e-10, 1e-10));
      const std::string what = "layer " + std::to_string(layer) + ", expert " + std::to_string(e);
      ASSERT_EQ(sparse.predictions, naive.predictions) << what;
      for (int64_t k = 0; k < set.tokens(); ++k) {
        ASSERT_EQ(naive.predictions[k], own[k].argmax().item<int64_t>()) << what << ", token " << k;
        ASSERT_NEAR(sparse.losses[k], naive.losses[k], 1e-10) << what;
        changed += sparse.predictions[k] != engine.predictions_before()[k];
      }
      skipped_sequences += set.sequences - static_cast<int64_t>(engine.affected_sequences({e}).size());
    }
  }
  EXPECT_GE(changed, 5);  // removing experts matters
  EXPECT_GT(skipped_sequences, 0);  // and the sparse path has sequences to skip
}

TEST(GptRouterMlps, TextSessionStoresTheCombineWeights) {
  testkit::TempDir dir;
  torch::manual_seed(21);
  nn::GptConfig c = router_config(1.0);
  c.vocab_size = 256;
  nn::MuMoEGpt gpt(c);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : gpt->named_parameters()) p.value().normal_(0.0, 0.6);
  }
  gpt->eval();
  const auto model_path = dir.file("gpt.safetensors");
  model::save_gpt(model_path, gpt, model::gpt_manifest(gpt, {{"seed", 0}, {"validation_fraction", 0.5}}));
  std::filesystem::create_directories(dir.file("docs"));
  const std::vector<std::string> docs = {"the cat sat on the mat", "the dog sat on the log", "a frog ran to the cat",
                                         "the cat and the dog met"};
  for (size_t i = 0; i < docs.size(); ++i) testkit::write_bytes(dir.file("docs/" + std::to_string(i) + ".txt"), docs[i]);
  analysis::TextSessionOptions o;
  o.model_path = model_path;
  o.data_spec = "text:" + dir.file("docs");
  o.layer = "transformer.h.1.mlp";
  o.cache_path = dir.file("cache.sqlite");
  o.max_sequences = 0;
  auto session = analysis::TextAnalysisSession::open(o);
  EXPECT_EQ(session->layer_name(), "transformer.h.1.mlp");
  session->extract();
  const auto& set = session->eval_set();
  ASSERT_GE(set.sequences, 2);
  const auto ids = torch::tensor(std::vector<int64_t>(set.stream.begin(), set.stream.begin() + set.tokens()))
                       .view({set.sequences, kContext});
  nn::MuMoEGpt g(c);
  {
    torch::NoGradGuard no_grad;
    const auto src = gpt->named_parameters();
    for (auto& p : g->named_parameters()) p.value().copy_(src[p.key()]);
  }
  g->to(torch::kFloat64);
  g->eval();
  const auto coefficients = brute_force_model(g, ids, 2).coefficients[1].reshape({-1, kExperts});
  const auto& run = session->run();
  ASSERT_EQ(run.samples(), set.tokens());
  int64_t routed = 0;
  for (int64_t e = 0; e < kExperts; ++e) {
    int64_t support = 0;
    for (int64_t k = 0; k < set.tokens(); ++k) support += coefficients[k][e].item<double>() > 0;
    EXPECT_EQ(run.columns[0].support(e), support) << "expert " << e;
    routed += support;
  }
  EXPECT_GT(routed, 0);
  analysis::GalleryRequest top;
  top.order = analysis::GalleryOrder::Top;
  for (int64_t e = 0; e < kExperts; ++e)
    if (run.columns[0].support(e) > run.columns[0].support(top.expert)) top.expert = e;
  const auto gallery = session->gallery(top, 4).value;
  ASSERT_FALSE(gallery.items.empty());
  // The extraction is float32: the float64 brute force's value to float32 accuracy.
  EXPECT_NEAR(gallery.items[0].coefficient, coefficients.select(1, top.expert).max().item<double>(), 1e-5);
}

}  // namespace gpt_router_mlps_test
