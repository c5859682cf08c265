// The μMoE GPT: nanoGPT's state-dict keys (spelled out here), causal attention checked against a
// naive per-position loop, coefficients and ablation of the MLP blocks, model files (manifest
// round trip and plain PyTorch state dicts), language-model training with exact resume,
// evaluation and seeded generation.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>

#include "io/errors.h"
#include "io/safetensors.h"
#include "model/classifier_file.h"
#include "model/gpt_file.h"
#include "nn/mumoe_gpt.h"
#include "reference_math.h"
#include "temp_dir.h"
#include "train/lm_training.h"

using namespace mumoe;
using testkit::TempDir;

namespace {

using ShapeMap = std::map<std::string, std::vector<int64_t>>;

// V 11, context 8, 2 layers of 2 heads, C 8, 5 experts, CP rank 6.
nn::GptConfig tiny_config() {
  nn::GptConfig c;
  c.vocab_size = 11;
  c.block_size = 8;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 8;
  c.experts = 5;
  c.cp_rank = 6;
  c.dropout = 0.1;
  return c;
}

// Random values everywhere (gating included) so that coefficients are not uniform and every
// parameter matters; eval mode.
nn::MuMoEGpt random_gpt(const nn::GptConfig& config, uint64_t seed) {
  torch::manual_seed(seed);
  nn::MuMoEGpt gpt(config);
  torch::NoGradGuard no_grad;
  for (auto& p : gpt->named_parameters()) p.value().normal_(0.0, 0.5);
  gpt->eval();
  return gpt;
}

torch::Tensor random_tokens(int64_t batch, int64_t length, int64_t vocab, uint64_t seed) {
  torch::manual_seed(seed);
  return torch::randint(0, vocab, {batch, length}, torch::kLong);
}

ShapeMap shapes_of(const std::vector<io::NamedTensor>& tensors) {
  ShapeMap out;
  for (const auto& t : tensors) out[t.name] = t.tensor.sizes().vec();
  return out;
}

// The nanoGPT-μMoE state dict of tiny_config(), keys and shapes as PyTorch writes them.
ShapeMap nanogpt_shapes() {
  ShapeMap s = {{"transformer.wte.weight", {11, 8}},
                {"transformer.wpe.weight", {8, 8}},
                {"transformer.ln_f.weight", {8}},
                {"transformer.ln_f.bias", {8}},
                {"lm_head.weight", {11, 8}}};
  for (const std::string i : {"0", "1"}) {
    const std::string h = "transformer.h." + i + ".";
    s[h + "ln_1.weight"] = {8};
    s[h + "ln_1.bias"] = {8};
    s[h + "attn.c_attn.weight"] = {24, 8};
    s[h + "attn.c_attn.bias"] = {24};
    s[h + "attn.c_proj.weight"] = {8, 8};
    s[h + "attn.c_proj.bias"] = {8};
    s[h + "mlp.MuMoE_layer.projs.0"] = {8, 5};
    s[h + "mlp.MuMoE_layer.input_ln.weight"] = {8};
    s[h + "mlp.MuMoE_layer.input_ln.bias"] = {8};
    s[h + "mlp.MuMoE_layer.MuMoE.factors.0"] = {5, 6};   // experts × rank
    s[h + "mlp.MuMoE_layer.MuMoE.factors.1"] = {9, 6};   // (C + 1 bias row) × rank
    s[h + "mlp.MuMoE_layer.MuMoE.factors.2"] = {32, 6};  // 4C × rank
    s[h + "mlp.MuMoE_layer.MuMoE2.factors.0"] = {5, 6};
    s[h + "mlp.MuMoE_layer.MuMoE2.factors.1"] = {33, 6};  // (4C + 1) × rank
    s[h + "mlp.MuMoE_layer.MuMoE2.factors.2"] = {8, 6};
  }
  return s;
}

// Random tensors under the nanoGPT names, lm_head.weight equal to transformer.wte.weight.
std::map<std::string, torch::Tensor> nanogpt_tensors(uint64_t seed) {
  torch::manual_seed(seed);
  std::map<std::string, torch::Tensor> t;
  for (const auto& [name, shape] : nanogpt_shapes()) t[name] = torch::randn(shape) * 0.5;
  t["lm_head.weight"] = t["transformer.wte.weight"].clone();
  return t;
}

// A model whose parameters are copied from `tensors` by their (module) names.
nn::MuMoEGpt gpt_from(const nn::GptConfig& config, const std::map<std::string, torch::Tensor>& tensors) {
  nn::MuMoEGpt gpt(config);
  torch::NoGradGuard no_grad;
  for (auto& p : gpt->named_parameters()) p.value().copy_(tensors.at(p.key()));
  gpt->eval();
  return gpt;
}

TEST(MuMoEGpt, StateDictHasNanoGptKeysAndShapes) {
  auto gpt = random_gpt(tiny_config(), 1);
  const auto tensors = model::gpt_state_dict(gpt);
  EXPECT_EQ(shapes_of(tensors), nanogpt_shapes());
  EXPECT_EQ(tensors.size(), nanogpt_shapes().size());  // no key twice
  // lm_head is tied: the very same tensor as the token embedding.
  const auto params = gpt->named_parameters();
  EXPECT_FALSE(params.contains("lm_head.weight"));  // registered once: AdamW updates it once
  EXPECT_TRUE(tensors.back().tensor.is_same(params["transformer.wte.weight"]));
}

TEST(MuMoEGpt, ConfigurationValidatesAndRoundTripsThroughJson) {
  auto c = tiny_config();
  c.gate_activation = nn::GateActivationKind::Softmax;
  const auto back = nn::gpt_config_from_json(nn::to_json(c));
  EXPECT_EQ(nn::to_json(back), nn::to_json(c));
  EXPECT_EQ(back.gate_activation, nn::GateActivationKind::Softmax);
  const auto mlp = c.mlp_config();
  EXPECT_EQ(mlp.input_dim, 8);
  EXPECT_EQ(mlp.output_dim, 32);
  EXPECT_EQ(mlp.second_dim, 8);
  EXPECT_EQ(mlp.gate_norm, nn::GateNorm::LayerNorm);
  EXPECT_TRUE(mlp.input_layer_norm);
  EXPECT_TRUE(mlp.use_bias);

  auto bad = tiny_config();
  bad.n_head = 3;  // does not divide 8
  EXPECT_THROW(bad.validate(), UsageError);
  auto json = nn::to_json(tiny_config());
  json.erase("n_embd");
  EXPECT_THROW(nn::gpt_config_from_json(json), UsageError);
  json = nn::to_json(tiny_config());
  json["experts"] = "many";
  EXPECT_THROW(nn::gpt_config_from_json(json), UsageError);
}

TEST(MuMoEGpt, RejectsBadTokenInput) {
  auto gpt = random_gpt(tiny_config(), 2);
  torch::NoGradGuard no_grad;
  EXPECT_THROW(gpt->forward(torch::zeros({1, 9}, torch::kLong)), UsageError);  // context is 8
  EXPECT_THROW(gpt->forward(torch::full({1, 3}, 11, torch::kLong)), UsageError);  // V is 11
  EXPECT_THROW(gpt->forward(torch::zeros({1, 3})), UsageError);                  // not integers
  EXPECT_THROW(gpt->forward(torch::zeros({1, 3}, torch::kLong), std::vector<nn::ExpertAblation>(3)), UsageError);
  EXPECT_THROW(gpt->residual_before_mlp(torch::zeros({1, 3}, torch::kLong), 2), UsageError);
  const auto out = gpt->forward(torch::zeros({2, 3}, torch::kInt32));
  EXPECT_EQ(out.logits.sizes(), (std::vector<int64_t>{2, 3, 11}));
  ASSERT_EQ(out.coefficients.size(), 2u);
  EXPECT_EQ(out.coefficients[1].sizes(), (std::vector<int64_t>{2, 3, 5}));
}

TEST(MuMoEGpt, IsCausal) {
  auto gpt = random_gpt(tiny_config(), 3);
  torch::NoGradGuard no_grad;
  const auto idx = random_tokens(2, 8, 11, 30);
  for (int64_t t = 0; t + 1 < 8; ++t) {
    auto changed = idx.clone();
    changed.select(1, t + 1).fill_((idx[0][t + 1].item<int64_t>() + 1) % 11);
    const auto a = gpt->forward(idx).logits, b = gpt->forward(changed).logits;
    EXPECT_TRUE(torch::equal(a.slice(1, 0, t + 1), b.slice(1, 0, t + 1))) << "position " << t;
    EXPECT_FALSE(torch::allclose(a.select(1, t + 1), b.select(1, t + 1))) << "position " << t + 1;
  }
}

TEST(MuMoEGpt, AttentionMatchesANaivePerPositionLoop) {
  auto gpt = random_gpt(tiny_config(), 4);
  gpt->to(torch::kFloat64);
  auto attn = gpt->block(1)->attn();
  torch::manual_seed(40);
  const int64_t B = 2, T = 6, C = 8, H = 2, D = C / H;
  const auto x = torch::randn({B, T, C}, torch::kFloat64);
  torch::NoGradGuard no_grad;
  const auto fast = attn->forward(x);

  const auto wa = attn->c_attn()->weight, ba = attn->c_attn()->bias;
  const auto wp = attn->c_proj()->weight, bp = attn->c_proj()->bias;
  auto expected = torch::zeros({B, T, C}, torch::kFloat64);
  for (int64_t b = 0; b < B; ++b) {
    // q, k, v of every position: rows 0..C-1, C..2C-1, 2C..3C-1 of c_attn.
    std::vector<std::vector<double>> qkv(T, std::vector<double>(3 * C));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t r = 0; r < 3 * C; ++r) {
        double s = ba[r].item<double>();
        for (int64_t c = 0; c < C; ++c) s += wa[r][c].item<double>() * x[b][t][c].item<double>();
        qkv[t][r] = s;
      }
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> y(C, 0.0);
      for (int64_t h = 0; h < H; ++h) {
        // Scores against positions 0..t only, softmax, weighted sum of the values.
        std::vector<double> score(t + 1);
        double top = -1e300;
        for (int64_t j = 0; j <= t; ++j) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d) s += qkv[t][h * D + d] * qkv[j][C + h * D + d];
          score[j] = s / std::sqrt(static_cast<double>(D));
          top = std::max(top, score[j]);
        }
        double total = 0;
        for (auto& s : score) total += (s = std::exp(s - top));
        for (int64_t j = 0; j <= t; ++j)
          for (int64_t d = 0; d < D; ++d) y[h * D + d] += score[j] / total * qkv[j][2 * C + h * D + d];
      }
      for (int64_t o = 0; o < C; ++o) {
        double s = bp[o].item<double>();
        for (int64_t c = 0; c < C; ++c) s += wp[o][c].item<double>() * y[c];
        expected[b][t][o] = s;
      }
    }
  }
  EXPECT_LE(testkit::relative_error(fast, expected), 1e-13);
}

TEST(MuMoEGpt, ReturnsTheMlpBlocksCoefficientsOnTheResidualStream) {
  auto gpt = random_gpt(tiny_config(), 5);
  torch::NoGradGuard no_grad;
  const auto idx = random_tokens(3, 7, 11, 50);
  const auto out = gpt->forward(idx, {}, /*keep_mlp_inputs=*/true);
  ASSERT_EQ(out.mlp_inputs.size(), 2u);
  for (int64_t l = 0; l < 2; ++l) {
    const auto residual = gpt->residual_before_mlp(idx, l);
    EXPECT_TRUE(torch::equal(residual, out.mlp_inputs[l]));
    const auto coefficients = gpt->block(l)->mlp()->coefficients(residual);
    ASSERT_EQ(coefficients.size(), 1u);
    EXPECT_TRUE(torch::equal(out.coefficients[l], coefficients[0]));
    EXPECT_NEAR(out.coefficients[l].sum(-1).mean().item<double>(), 1.0, 1e-6);  // entmax: a simplex
  }
}

TEST(MuMoEGpt, AblatingEveryExpertOfABlockRemovesTheBlock) {
  auto gpt = random_gpt(tiny_config(), 6);
  torch::NoGradGuard no_grad;
  const auto idx = random_tokens(2, 8, 11, 60);
  std::vector<nn::ExpertAblation> ablation(2);
  ablation[1] = nn::ExpertAblation::first_mode({0, 1, 2, 3, 4});
  const auto plain = gpt->forward(idx);
  const auto ablated = gpt->forward(idx, ablation);
  EXPECT_TRUE(torch::equal(ablated.coefficients[0], plain.coefficients[0]));  // layer 0 untouched
  EXPECT_EQ(ablated.coefficients[1].abs().sum().item<double>(), 0.0);
  EXPECT_FALSE(torch::allclose(ablated.logits, plain.logits));

  // The same model with block 1's expert factors zeroed: its MLP adds exactly 0 (x + 0).
  auto params = gpt->named_parameters();
  params["transformer.h.1.mlp.MuMoE_layer.MuMoE.factors.0"].zero_();
  params["transformer.h.1.mlp.MuMoE_layer.MuMoE2.factors.0"].zero_();
  EXPECT_TRUE(torch::equal(gpt->forward(idx).logits, ablated.logits));
}

TEST(GptFile, SaveAndLoadRoundTripIsExact) {
  TempDir dir;
  auto gpt = random_gpt(tiny_config(), 7);
  const auto path = dir.file("gpt.safetensors");
  model::save_gpt(path, gpt, model::gpt_manifest(gpt, {{"note", "test"}}));

  const auto file = model::ModelFile::load(path);
  EXPECT_FALSE(file.inferred());
  EXPECT_EQ(file.manifest().architecture, "mumoe-gpt");
  EXPECT_EQ(file.manifest().architecture_config.at("tokenizer"), "byte");
  ASSERT_EQ(file.manifest().layers.size(), 2u);
  EXPECT_EQ(file.manifest().layers[1].name, "transformer.h.1.mlp.MuMoE_layer");
  EXPECT_EQ(file.manifest().layers[1].prefix, "transformer.h.1.mlp.MuMoE_layer.");
  EXPECT_EQ(shapes_of([&] {
              std::vector<io::NamedTensor> t;
              for (const auto& name : file.tensor_names()) t.push_back({name, file.read_tensor(name)});
              return t;
            }()),
            nanogpt_shapes());

  auto loaded = model::load_gpt(file);
  EXPECT_EQ(nn::to_json(loaded->config()), nn::to_json(gpt->config()));
  const auto original = model::gpt_state_dict(gpt), reloaded = model::gpt_state_dict(loaded);
  ASSERT_EQ(original.size(), reloaded.size());
  for (size_t i = 0; i < original.size(); ++i) {
    EXPECT_EQ(original[i].name, reloaded[i].name);
    EXPECT_TRUE(torch::equal(original[i].tensor, reloaded[i].tensor)) << original[i].name;
  }
  torch::NoGradGuard no_grad;
  const auto idx = random_tokens(2, 8, 11, 70);
  EXPECT_TRUE(torch::equal(loaded->forward(idx).logits, gpt->forward(idx).logits));
  // Every MLP block is an ordinary μMoE layer of the file too.
  auto layer = file.build_layer("transformer.h.1.mlp.MuMoE_layer");
  const auto h = gpt->residual_before_mlp(idx, 1);
  EXPECT_TRUE(torch::equal(layer->forward(h).output, gpt->block(1)->mlp()->forward(h).output));
}

TEST(GptFile, RejectsOtherArchitectures) {
  TempDir dir;
  torch::manual_seed(0);
  nn::BackboneConfig b;
  b.image_size = 8;
  b.channels1 = 2;
  b.channels2 = 2;
  b.feature_dim = 4;
  nn::LayerConfig head;
  head.input_dim = 4;
  head.output_dim = 2;
  head.expert_dims = {3};
  head.cp_rank = 2;
  nn::ImageClassifier classifier(b, head);
  const auto path = dir.file("classifier.safetensors");
  model::save_image_classifier(path, classifier, model::image_classifier_manifest(classifier, {}, {}));
  EXPECT_THROW(model::load_gpt(model::ModelFile::load(path)), FileError);
}

TEST(GptFile, LoadsAPlainPyTorchStateDict) {
  TempDir dir;
  const auto tensors = nanogpt_tensors(8);
  std::vector<io::NamedTensor> plain;
  for (const auto& [name, t] : tensors) plain.push_back({"_orig_mod." + name, t});
  // nanoGPT under PyTorch < 2.0 also saves its causal masks; they carry nothing to load.
  plain.push_back({"_orig_mod.transformer.h.0.attn.bias", torch::ones({8, 8}).tril().view({1, 1, 8, 8})});
  const auto path = dir.file("plain.safetensors");
  io::write_safetensors(path, plain);

  const auto file = model::ModelFile::load(path);
  EXPECT_TRUE(file.inferred());
  // GPT-2's head width of 64 when the caller does not know the head count.
  EXPECT_EQ(model::default_head_count(8), 1);
  EXPECT_EQ(model::default_head_count(128), 2);
  EXPECT_EQ(model::default_head_count(768), 12);
  EXPECT_EQ(model::default_head_count(200), 2);  // round(200/64) = 3 does not divide 200
  auto gpt = model::load_gpt_state_dict(file, /*n_head=*/2);
  const auto& c = gpt->config();
  EXPECT_EQ(c.vocab_size, 11);
  EXPECT_EQ(c.block_size, 8);
  EXPECT_EQ(c.n_layer, 2);
  EXPECT_EQ(c.n_head, 2);
  EXPECT_EQ(c.n_embd, 8);
  EXPECT_EQ(c.experts, 5);
  EXPECT_EQ(c.cp_rank, 6);
  EXPECT_EQ(c.factorization, nn::Factorization::CP);

  auto direct = gpt_from(tiny_config(), tensors);
  torch::NoGradGuard no_grad;
  const auto idx = random_tokens(2, 8, 11, 80);
  EXPECT_TRUE(torch::equal(gpt->forward(idx).logits, direct->forward(idx).logits));
  // load_gpt takes the same route for a file without a manifest.
  EXPECT_TRUE(torch::equal(model::load_gpt(file, 2)->forward(idx).logits, direct->forward(idx).logits));
}

TEST(GptFile, HandlesEitherHalfOfTheTiedEmbedding) {
  TempDir dir;
  auto tensors = nanogpt_tensors(9);
  auto direct = gpt_from(tiny_config(), tensors);
  torch::NoGradGuard no_grad;
  const auto idx = random_tokens(1, 8, 11, 90);
  const auto expected = direct->forward(idx).logits;
  // safetensors' save_model keeps only one name of a shared tensor.
  for (const std::string drop : {"lm_head.weight", "transformer.wte.weight"}) {
    std::vector<io::NamedTensor> plain;
    for (const auto& [name, t] : tensors)
      if (name != drop) plain.push_back({name, t});
    const auto path = dir.file("without-" + drop + ".safetensors");
    io::write_safetensors(path, plain);
    auto gpt = model::load_gpt_state_dict(model::ModelFile::load(path), 2);
    EXPECT_TRUE(torch::equal(gpt->forward(idx).logits, expected)) << "without " << drop;
  }
  // Untied weights cannot be represented: an error, not a silent choice.
  tensors["lm_head.weight"] = tensors["lm_head.weight"] + 1;
  std::vector<io::NamedTensor> untied;
  for (const auto& [name, t] : tensors) untied.push_back({name, t});
  const auto path = dir.file("untied.safetensors");
  io::write_safetensors(path, untied);
  EXPECT_THROW(model::load_gpt_state_dict(model::ModelFile::load(path), 2), FileError);
}

TEST(GptFile, RejectsStateDictsThatAreNotThisGpt) {
  TempDir dir;
  auto write = [&](const std::map<std::string, torch::Tensor>& tensors) {
    std::vector<io::NamedTensor> plain;
    for (const auto& [name, t] : tensors) plain.push_back({name, t});
    const auto path = dir.file("bad.safetensors");
    io::write_safetensors(path, plain);
    return path;
  };
  auto extra = nanogpt_tensors(10);
  extra["transformer.h.2.ln_1.bias"] = torch::zeros({8});  // a third layer without weights
  EXPECT_THROW(model::load_gpt_state_dict(model::ModelFile::load(write(extra)), 2), FileError);
  auto no_pos = nanogpt_tensors(10);
  no_pos.erase("transformer.wpe.weight");
  EXPECT_THROW(model::load_gpt_state_dict(model::ModelFile::load(write(no_pos)), 2), FileError);
  auto wrong = nanogpt_tensors(10);
  wrong["transformer.h.1.attn.c_attn.weight"] = torch::zeros({16, 8});
  EXPECT_THROW(model::load_gpt_state_dict(model::ModelFile::load(write(wrong)), 2), FileError);
  EXPECT_THROW(model::load_gpt_state_dict(model::ModelFile::load(write(nanogpt_tensors(10))), 3), UsageError);
}

// ---------------------------------------------------------------------------------------------

std::vector<int32_t> repeated_abc(size_t length) {
  std::vector<int32_t> tokens;
  for (size_t i = 0; i < length; ++i) tokens.push_back('a' + static_cast<int32_t>(i % 3));
  return tokens;
}

nn::GptConfig byte_config() {
  nn::GptConfig c;
  c.block_size = 16;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 32;
  c.experts = 8;
  c.cp_rank = 16;
  c.dropout = 0.0;
  return c;
}

TEST(LmTraining, LearnsARepetitiveByteCorpus) {
  torch::manual_seed(11);
  nn::MuMoEGpt gpt(byte_config());
  const auto corpus = repeated_abc(600);
  const auto before = train::evaluate_lm(gpt, corpus);
  train::LmTrainOptions o;
  o.steps = 60;
  o.batch_size = 8;
  o.learning_rate = 5e-3;
  o.warmup_steps = 5;
  const auto result = train::train_lm(gpt, corpus, o);
  const auto after = train::evaluate_lm(gpt, corpus);
  ASSERT_EQ(result.losses.size(), 60u);
  EXPECT_GT(result.losses.front(), 5.0);  // ≈ ln 256 at initialisation
  EXPECT_LT(result.losses.back(), 0.4);
  EXPECT_LT(after.mean_loss, 0.4) << "before: " << before.mean_loss;
  EXPECT_GT(after.accuracy, 0.99);
  EXPECT_EQ(after.tokens, 599);
  EXPECT_NEAR(after.perplexity, std::exp(after.mean_loss), 1e-12);
}

TEST(LmTraining, LearningRateWarmsUpThenDecays) {
  train::LmTrainOptions o;
  o.steps = 101;
  o.warmup_steps = 10;
  o.learning_rate = 1e-3;
  o.min_learning_rate = 1e-4;
  EXPECT_DOUBLE_EQ(train::lm_learning_rate_at(o, 0), 1e-3 / 11);
  EXPECT_DOUBLE_EQ(train::lm_learning_rate_at(o, 10), 1e-3);
  EXPECT_NEAR(train::lm_learning_rate_at(o, 55), 5.5e-4, 1e-12);  // half way: the mean
  EXPECT_DOUBLE_EQ(train::lm_learning_rate_at(o, 100), 1e-4);
}

TEST(LmTraining, EvaluationCoversEveryTokenOnceInNonOverlappingWindows) {
  auto gpt = random_gpt(tiny_config(), 12);
  std::vector<int32_t> tokens;
  torch::manual_seed(120);
  for (int i = 0; i < 20; ++i) tokens.push_back(static_cast<int32_t>(torch::randint(0, 11, {1}).item<int64_t>()));
  const auto e = train::evaluate_lm(gpt, tokens, /*block_size=*/8, /*batch_size=*/1);
  // Windows [0, 8], [8, 16], [16, 19]: 8 + 8 + 3 predicted tokens.
  double loss = 0;
  int64_t correct = 0;
  torch::NoGradGuard no_grad;
  for (const auto& [begin, length] : std::vector<std::pair<int, int>>{{0, 8}, {8, 8}, {16, 3}}) {
    std::vector<int64_t> window(tokens.begin() + begin, tokens.begin() + begin + length + 1);
    const auto w = torch::tensor(window);
    const auto logits = gpt->forward(w.slice(0, 0, length).view({1, -1})).logits[0].to(torch::kFloat64);
    const auto targets = w.slice(0, 1);
    loss += torch::cross_entropy_loss(logits, targets, {}, at::Reduction::Sum).item<double>();
    correct += (logits.argmax(1) == targets).sum().item<int64_t>();
  }
  EXPECT_EQ(e.tokens, 19);
  EXPECT_NEAR(e.mean_loss, loss / 19, 1e-6);
  EXPECT_DOUBLE_EQ(e.accuracy, correct / 19.0);
  // Batching does not change the result.
  EXPECT_NEAR(train::evaluate_lm(gpt, tokens, 8, 32).mean_loss, e.mean_loss, 1e-6);
  EXPECT_THROW(train::evaluate_lm(gpt, {1}), UsageError);
  EXPECT_THROW(train::evaluate_lm(gpt, {1, 2, 11}), UsageError);
  EXPECT_THROW(train::evaluate_lm(gpt, tokens, 9), UsageError);  // longer than the context
}

TEST(LmTraining, ResumedTrainingEqualsUninterruptedTraining) {
  torch::set_num_threads(1);  // bit-for-bit comparison needs a fixed reduction order
  TempDir dir;
  auto config = byte_config();
  config.dropout = 0.1;  // dropout masks must be reproduced too
  const auto corpus = repeated_abc(300);
  train::LmTrainOptions o;
  o.steps = 12;
  o.batch_size = 4;
  o.warmup_steps = 3;
  o.checkpoint_every = 4;
  o.checkpoint_path = dir.file("ckpt.safetensors");

  auto make_io = [](nn::MuMoEGpt& gpt) {
    train::LmCheckpointWriter write = [&gpt](const std::string& path, int64_t done) {
      model::save_gpt(path, gpt, model::gpt_manifest(gpt, {{"completed_steps", done}}));
    };
    train::LmCheckpointReader read = [&gpt](const std::string& path) {
      const auto file = model::ModelFile::load(path);
      model::load_gpt_weights(file, gpt);
      return file.manifest().provenance.at("completed_steps").get<int64_t>();
    };
    return std::make_pair(write, read);
  };

  torch::manual_seed(13);
  nn::MuMoEGpt full(config);
  auto [w1, r1] = make_io(full);
  const auto uninterrupted = train::train_lm(full, corpus, o, {}, w1, r1);

  // Cancelled after step 6: the checkpoint of step 4 is the last one written ...
  torch::manual_seed(13);
  nn::MuMoEGpt part(config);
  auto [w2, r2] = make_io(part);
  EXPECT_THROW(train::train_lm(part, corpus, o, [](const train::LmTrainProgress& p) { return p.step < 6; }, w2, r2),
               Cancelled);
  // ... and a fresh model resumes from it.
  torch::manual_seed(99);
  nn::MuMoEGpt resumed(config);
  auto [w3, r3] = make_io(resumed);
  o.resume = true;
  const auto result = train::train_lm(resumed, corpus, o, {}, w3, r3);
  EXPECT_EQ(result.first_step, 4);
  ASSERT_EQ(result.losses.size(), 8u);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(result.losses[i], uninterrupted.losses[4 + i]) << "step " << 4 + i;
  const auto a = model::gpt_state_dict(full), b = model::gpt_state_dict(resumed);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i].tensor, b[i].tensor)) << a[i].name;
}

TEST(MuMoEGpt, GenerationIsDeterministicForASeed) {
  auto gpt = random_gpt(tiny_config(), 14);
  gpt->train();
  const std::vector<int32_t> prompt = {1, 2, 3};
  const auto a = gpt->generate(prompt, 20, 1.0, 0, 5);
  EXPECT_TRUE(gpt->is_training());  // the mode is restored
  EXPECT_EQ(a.size(), 20u);  // more than the context of 8: the window slides
  for (auto id : a) EXPECT_TRUE(id >= 0 && id < 11);
  EXPECT_EQ(gpt->generate(prompt, 20, 1.0, 0, 5), a);
  EXPECT_NE(gpt->generate(prompt, 20, 1.0, 0, 6), a);
  // Temperature 0 and top-k 1 are both greedy decoding.
  const auto greedy = gpt->generate(prompt, 10, 0.0, 0, 0);
  EXPECT_EQ(gpt->generate(prompt, 10, 1.0, 1, 123), greedy);
  gpt->eval();
  torch::NoGradGuard no_grad;
  const auto logits = gpt->forward(torch::tensor(std::vector<int64_t>{1, 2, 3}).view({1, 3})).logits;
  EXPECT_EQ(greedy[0], logits[0][2].argmax().item<int64_t>());
  EXPECT_THROW(gpt->generate({}, 5), UsageError);
  EXPECT_THROW(gpt->generate({11}, 5), UsageError);
}

}  // namespace
