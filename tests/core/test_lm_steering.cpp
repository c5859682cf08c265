// Steering a μMoE GPT with an expert's cluster centre (analysis/lm_steering.h): the centre
// against a brute-force mean over a plain forward pass, α = 0 against the model's own
// generate(), and the steered logits against a manual forward with α·c added by hand.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>

#include "analysis/lm_forward.h"
#include "analysis/lm_steered_generation.h"
#include "analysis/lm_steering.h"
#include "analysis/text_analysis_session.h"
#include "io/errors.h"
#include "model/gpt_file.h"
#include "temp_dir.h"
#include "text/byte_tokenizer.h"

using namespace mumoe;
using namespace mumoe::analysis;

namespace {

// A small random GPT whose gates are loud (N(0,1) projections) so entmax is sparse and experts
// differ; dropout 0. Byte vocabulary, so TextAnalysisSession accepts it.
nn::MuMoEGpt small_gpt(uint64_t seed, torch::Dtype dtype = torch::kFloat32) {
  nn::GptConfig c;
  c.vocab_size = 256;
  c.block_size = 16;
  c.n_layer = 3;
  c.n_head = 2;
  c.n_embd = 16;
  c.experts = 12;
  c.cp_rank = 8;
  c.dropout = 0;
  torch::manual_seed(seed);
  nn::MuMoEGpt gpt(c);
  torch::NoGradGuard g;
  for (auto& p : gpt->named_parameters()) {
    if (p.key().find("projs") != std::string::npos)
      p.value().normal_(0.0, 1.0);
    else if (p.key().find("factors") != std::string::npos)
      p.value().mul_(2.5);
    else if (p.key().find("wte") != std::string::npos || p.key().find("wpe") != std::string::npos)
      p.value().normal_(0.0, 0.5);
  }
  gpt->to(dtype);
  gpt->eval();
  return gpt;
}

struct Fixture {
  testkit::TempDir dir;
  nn::MuMoEGpt gpt = small_gpt(7);
  std::unique_ptr<TextAnalysisSession> session;

  explicit Fixture(int64_t layer) {
    const auto model_path = dir.file("gpt.safetensors");
    model::save_gpt(model_path, gpt, model::gpt_manifest(gpt, {{"seed", 0}, {"validation_fraction", 0.5}}));
    std::filesystem::create_directories(dir.file("docs"));
    const std::vector<std::string> docs = {"the cat sat on the mat", "the dog sat on the log", "a frog ran to the cat",
                                           "the cat and the dog met", "on the log sat a frog",
                                           "the mat, the log, the cat"};
    for (size_t i = 0; i < docs.size(); ++i)
      testkit::write_bytes(dir.file("docs/" + std::to_string(i) + ".txt"), docs[i]);
    TextSessionOptions o;
    o.model_path = model_path;
    o.data_spec = "text:" + dir.file("docs");
    o.layer = std::to_string(layer);
    o.cache_path = dir.file("cache.sqlite");
    o.max_sequences = 0;
    session = TextAnalysisSession::open(o);
    session->extract();
  }
};

}  // namespace

// The centre = the mean (or a_n-weighted mean) of h_L over the tokens with a_n ≥ threshold,
// computed here from a plain float64 forward pass that keeps the MLP inputs.
TEST(LmSteering, CentreIsTheMeanInputOfTheSelectedTokens) {
  const int64_t layer = 1;
  Fixture f(layer);
  const auto& set = f.session->eval_set();
  ASSERT_GE(set.sequences, 2);
  auto g = copy_gpt(f.gpt, torch::kFloat64, torch::kCPU);
  std::vector<int64_t> ids(set.stream.begin(), set.stream.begin() + set.tokens());
  torch::NoGradGuard ng;
  const auto out = g->forward(torch::tensor(ids).view({set.sequences, set.block_size}), {}, true);
  const auto h = out.mlp_inputs[layer].reshape({set.tokens(), -1});
  const auto a = out.coefficients[layer].reshape({set.tokens(), -1});
  const int64_t experts = f.session->expert_count(), dim = h.size(1);

  int64_t compared = 0, dead = 0;
  for (const double threshold : {0.5, 0.2}) {
    for (const bool weighted : {false, true}) {
      for (int64_t e = 0; e < experts; ++e) {
        std::vector<double> sum(dim, 0.0);
        double weight = 0;
        int64_t count = 0;
        for (int64_t k = 0; k < set.tokens(); ++k) {
          const double an = a[k][e].item<double>();
          if (an < threshold) continue;
          const double w = weighted ? an : 1.0;
          for (int64_t c = 0; c < dim; ++c) sum[c] += w * h[k][c].item<double>();
          weight += w;
          ++count;
        }
        const CentreOptions options{threshold, weighted};
        if (count == 0) {
          EXPECT_THROW(f.session->steering_vector(e, options), UsageError) << "expert " << e;
          ++dead;
          continue;
        }
        const auto v = f.session->steering_vector(e, options);
        ASSERT_EQ(v.tokens_used, count) << "expert " << e;
        ASSERT_EQ(v.layer, layer);
        ASSERT_EQ(static_cast<int64_t>(v.centre.size()), dim);
        double norm = 0;
        for (int64_t c = 0; c < dim; ++c) {
          // The cache keeps h_L as float32: agreement to float32 rounding.
          ASSERT_NEAR(v.centre[c], sum[c] / weight, 1e-5 * (1 + std::abs(sum[c] / weight))) << "expert " << e;
          norm += v.centre[c] * v.centre[c];
        }
        EXPECT_NEAR(v.norm, std::sqrt(norm), 1e-12);
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 8);  // the test compares real centres
  EXPECT_THROW(f.session->steering_vector(experts), UsageError);
  EXPECT_THROW(f.session->steering_vector(-1), UsageError);
  (void)dead;
}

// α = 0 gives the model's own generate() token for token (same seed, same stream), through
// the session too; α ≠ 0 changes the text; the same seed repeats the steered text.
TEST(LmSteering, AlphaZeroReproducesTheUnsteeredText) {
  auto gpt = small_gpt(11);
  const std::vector<int32_t> prompt = {'T', 'h', 'e', ' '};
  torch::manual_seed(5);
  const auto centre = torch::randn({gpt->config().n_embd}, torch::kFloat64);
  for (const auto site : {SteeringSite::MlpInput, SteeringSite::Residual}) {
    for (const uint64_t seed : {0u, 3u}) {
      // 40 tokens > block_size 16: the cropped context is exercised as well.
      const auto plain = gpt->generate(prompt, 40, 0.8, 40, seed);
      const auto zero = generate_steered(gpt, prompt, 40, {1, centre, 0.0, site}, 0.8, 40, seed);
      EXPECT_EQ(zero, plain);
      const auto greedy = generate_steered(gpt, prompt, 40, {2, centre, 0.0, site}, 0.0, 0, seed);
      EXPECT_EQ(greedy, gpt->generate(prompt, 40, 0.0, 0, seed));
      const auto steered = generate_steered(gpt, prompt, 40, {1, centre, 6.0, site}, 0.8, 40, seed);
      EXPECT_NE(steered, plain);
      EXPECT_EQ(generate_steered(gpt, prompt, 40, {1, centre, 6.0, site}, 0.8, 40, seed), steered);
    }
  }

  Fixture f(2);
  SteeringRequest r;
  r.alpha = 0;
  r.prompt = "the ";
  r.tokens = 24;
  r.seed = 4;
  r.centre.threshold = 0.1;
  for (int64_t e = 0; e < f.session->expert_count(); ++e) {
    try {
      f.session->steering_vector(e, r.centre);
    } catch (const UsageError&) {
      continue;
    }
    r.expert = e;
    break;
  }
  const auto same = f.session->steer(r);
  EXPECT_EQ(same.layer_name, "transformer.h.2.mlp.MuMoE_layer");
  EXPECT_EQ(same.vector.expert, r.expert);
  EXPECT_GT(same.vector.tokens_used, 0);
  EXPECT_EQ(same.steered_tokens, same.unsteered_tokens);
  EXPECT_EQ(same.steered, same.unsteered);
  EXPECT_EQ(same.first_difference, -1);
  const text::ByteTokenizer tok;
  EXPECT_EQ(same.unsteered_tokens, f.gpt->generate(tok.encode(r.prompt), 24, 0.8, 40, 4));
  EXPECT_EQ(same.unsteered, tok.decode(same.unsteered_tokens));
  r.alpha = 50;  // the tiny random model's centres are short: a large α to be sure to move it
  r.site = SteeringSite::Residual;
  const auto moved = f.session->steer(r);
  EXPECT_EQ(moved.unsteered, same.unsteered);
  EXPECT_NE(moved.steered, moved.unsteered);
  EXPECT_GE(moved.first_difference, 0);
}

// The logits at the first steered step (the prompt's forward pass) equal a manual forward with
// α·c added by hand: h_L from the model's own residual_before_mlp, then either
// h + mlp(h + αc) (MLP input) or h' + mlp(h'), h' = h + αc (residual), then the blocks above.
TEST(LmSteering, LogitsMoveByExactlyTheAddedVector) {
  auto gpt = small_gpt(13, torch::kFloat64);
  torch::manual_seed(9);
  const auto idx = torch::randint(256, {2, 10}, torch::kLong);
  const auto c = torch::randn({gpt->config().n_embd}, torch::kFloat64);
  const double alpha = 3.0;
  torch::NoGradGuard ng;
  for (int64_t layer = 0; layer < gpt->n_layer(); ++layer) {
    const auto plain = gpt->forward(idx).logits;
    for (const auto site : {SteeringSite::MlpInput, SteeringSite::Residual}) {
      // α = 0: bit for bit the model's forward.
      EXPECT_TRUE(torch::equal(steered_logits(gpt, idx, {layer, c, 0.0, site}), plain));
      const auto h = gpt->residual_before_mlp(idx, layer);
      auto block = gpt->block(layer);
      torch::Tensor x;
      if (site == SteeringSite::MlpInput) {
        x = h + block->mlp()->forward(h + alpha * c).output;
      } else {
        const auto shifted = h + alpha * c;
        x = shifted + block->mlp()->forward(shifted).output;
      }
      const auto manual = forward_from_block(gpt, x, layer + 1);
      const auto steered = steered_logits(gpt, idx, {layer, c, alpha, site});
      EXPECT_TRUE(torch::allclose(steered, manual, 1e-12, 1e-12)) << "layer " << layer << " " << to_string(site);
      EXPECT_GT((steered - plain).abs().max().item<double>(), 1e-3) << "layer " << layer;
      // A float32 centre on a float64 model is converted, not rejected.
      EXPECT_TRUE(torch::allclose(steered_logits(gpt, idx, {layer, c.to(torch::kFloat32), alpha, site}), steered,
                                  1e-5, 1e-5));
    }
  }
  EXPECT_THROW(steered_logits(gpt, idx, {3, c, 1.0, SteeringSite::MlpInput}), UsageError);
  EXPECT_THROW(steered_logits(gpt, idx, {0, torch::zeros({5}), 1.0, SteeringSite::MlpInput}), UsageError);
  EXPECT_EQ(parse_steering_site("residual"), SteeringSite::Residual);
  EXPECT_THROW(parse_steering_site("gate"), UsageError);
}
