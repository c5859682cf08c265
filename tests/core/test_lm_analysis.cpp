// The text-model analysis engine against independent computations: sparse ablation (only the
// affected sequences / tokens re-run from block L) against the naive oracle (factor slices
// zeroed, every sequence through the whole model) token for token, both against the GPT's own
// gate-level ablation (nn::ExpertAblation); the affected set, the per-class metrics and the
// token galleries against brute-force loops over a plain forward pass.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "analysis/lm_ablation.h"
#include "analysis/lm_eval_set.h"
#include "analysis/lm_forward.h"
#include "analysis/text_analysis_session.h"
#include "io/errors.h"
#include "model/gpt_file.h"
#include "temp_dir.h"
#include "text/byte_tokenizer.h"
#include "text/utf8.h"

using namespace mumoe;
using namespace mumoe::analysis;

namespace {

// A small random GPT, loud enough that removing one expert flips predictions: random gates
// (N(0,1), so entmax is sparse and experts differ), embeddings N(0, 0.5), μMoE factors ×2.5.
// vocab 6 keeps next-token accuracy near 1/6 without training, so the metrics mean something.
nn::MuMoEGpt small_gpt(nn::Factorization f, uint64_t seed, int64_t vocab = 6) {
  nn::GptConfig c;
  c.vocab_size = vocab;
  c.block_size = 16;
  c.n_layer = 3;
  c.n_head = 2;
  c.n_embd = 16;
  c.experts = 12;
  c.factorization = f;
  c.cp_rank = 8;
  if (f == nn::Factorization::TR) c.tr_ranks = {2, 3, 4};
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
  gpt->eval();
  return gpt;
}

// 24 sequences of 8 random ids in [0, vocab), in 3 "documents". Short sequences and 12 experts
// leave some sequences without an expert, so the sparse path has something to skip.
LmEvalSet small_set(int64_t vocab = 6) {
  torch::manual_seed(99);
  const auto ids = torch::randint(vocab, {24 * 8 + 1}, torch::kLong);
  std::vector<int32_t> stream;
  for (int64_t k = 0; k < ids.numel(); ++k) stream.push_back(static_cast<int32_t>(ids[k].item<int64_t>()));
  return make_lm_eval_set(stream, {0, 50, 120}, 8, 24, "test");
}

struct Full {
  std::vector<int64_t> predictions;
  std::vector<double> losses;
  torch::Tensor coefficients;  // [tokens, N] of the layer asked for
};

// A plain forward pass (float64 unless asked) of every sequence in one batch through the GPT's own
// forward(), with its gate-level ablation (a_n := 0 inside the gate): a third implementation next
// to sparse and naive, and another path than the extraction's forward_at_layer.
Full reference(const nn::MuMoEGpt& gpt, const LmEvalSet& set, int64_t layer, const std::vector<int64_t>& experts,
               torch::Dtype dtype = torch::kFloat64) {
  nn::MuMoEGpt g(gpt->config());
  {
    torch::NoGradGuard ng;
    const auto src = gpt->named_parameters();
    for (auto& p : g->named_parameters()) p.value().copy_(src[p.key()]);
  }
  g->to(dtype);
  g->eval();
  torch::NoGradGuard ng;
  const int64_t t = set.block_size;
  std::vector<int64_t> ids(set.stream.begin(), set.stream.begin() + set.tokens());
  std::vector<int64_t> targets(set.stream.begin() + 1, set.stream.begin() + set.tokens() + 1);
  std::vector<nn::ExpertAblation> ablation(layer + 1);
  ablation[layer] = nn::ExpertAblation::first_mode(experts);
  const auto out = g->forward(torch::tensor(ids).view({set.sequences, t}), ablation);
  const auto logits = out.logits.reshape({-1, g->config().vocab_size});
  const auto tgt = torch::tensor(targets);
  const auto losses = torch::cross_entropy_loss(logits, tgt, {}, at::Reduction::None);
  Full f;
  for (int64_t k = 0; k < set.tokens(); ++k) {
    f.predictions.push_back(logits[k].argmax().item<int64_t>());
    f.losses.push_back(losses[k].item<double>());
  }
  f.coefficients = out.coefficients[layer].reshape({set.tokens(), -1});
  return f;
}

class LmSparseEqualsNaive : public ::testing::TestWithParam<nn::Factorization> {};

TEST_P(LmSparseEqualsNaive, TokenForTokenInEveryLayer) {
  const auto gpt = small_gpt(GetParam(), 3);
  const auto set = small_set();
  const int64_t n = gpt->config().experts;
  int64_t changed_total = 0, unaffected_sequences_seen = 0;
  for (int64_t layer = 0; layer < gpt->n_layer(); ++layer) {
    LmAblation engine(gpt, set, layer);
    const auto before = reference(gpt, set, layer, {});
    ASSERT_EQ(engine.predictions_before(), before.predictions) << "layer " << layer;
    std::vector<std::vector<int64_t>> cases;
    for (int64_t e = 0; e < n; ++e) cases.push_back({e});
    cases.push_back({0, n - 1});
    for (const auto& experts : cases) {
      const auto sparse = engine.after(experts, AblationMethod::Sparse);
      const auto naive = engine.after(experts, AblationMethod::Naive);
      const auto ref = reference(gpt, set, layer, experts);
      const std::string what = "layer " + std::to_string(layer) + ", experts " + std::to_string(experts[0]) + "…";
      ASSERT_EQ(sparse.predictions, naive.predictions) << what;
      ASSERT_EQ(naive.predictions, ref.predictions) << what;
      for (int64_t k = 0; k < set.tokens(); ++k) {
        ASSERT_NEAR(sparse.losses[k], naive.losses[k], 1e-10) << what << ", token " << k;
        ASSERT_NEAR(naive.losses[k], ref.losses[k], 1e-10) << what << ", token " << k;
        changed_total += sparse.predictions[k] != before.predictions[k];
      }
      // The affected set by brute force: sequences with a token whose a_n > 0.
      std::set<int64_t> brute;
      for (int64_t k = 0; k < set.tokens(); ++k)
        for (auto e : experts)
          if (before.coefficients[k][e].item<double>() > 0) brute.insert(k / set.block_size);
      const auto affected = engine.affected_sequences(experts);
      ASSERT_EQ(std::vector<int64_t>(brute.begin(), brute.end()), affected) << what;
      // Outside the affected sequences nothing may change, not even in the last bit (naive).
      for (int64_t s = 0; s < set.sequences; ++s) {
        if (brute.count(s)) continue;
        ++unaffected_sequences_seen;
        for (int64_t i = 0; i < set.block_size; ++i)
          ASSERT_EQ(naive.losses[s * set.block_size + i], engine.losses_before()[s * set.block_size + i]);
      }
    }
    // Sweeps agree too.
    const auto ss = engine.sweep(AblationMethod::Sparse), sn = engine.sweep(AblationMethod::Naive);
    ASSERT_EQ(ss.experts.size(), static_cast<size_t>(n));
    for (int64_t e = 0; e < n; ++e) {
      EXPECT_EQ(ss.experts[e].outcome.after.correct, sn.experts[e].outcome.after.correct);
      EXPECT_EQ(ss.experts[e].outcome.changed_predictions, sn.experts[e].outcome.changed_predictions);
      EXPECT_NEAR(ss.experts[e].loss_after, sn.experts[e].loss_after, 1e-12);
    }
    EXPECT_EQ(ss.experts_with_effect, sn.experts_with_effect);
  }
  // The test means something: ablations change predictions, and some sequences are skipped.
  EXPECT_GT(changed_total, 20);
  EXPECT_GT(unaffected_sequences_seen, 0);
}

INSTANTIATE_TEST_SUITE_P(CpAndTr, LmSparseEqualsNaive,
                         ::testing::Values(nn::Factorization::CP, nn::Factorization::TR));

TEST(LmAblationMetrics, MatchBruteForceOverOccurringClasses) {
  const auto gpt = small_gpt(nn::Factorization::CP, 5);
  const auto set = small_set();
  const int64_t layer = 1;
  LmAblation engine(gpt, set, layer);
  const auto before = reference(gpt, set, layer, {});
  // Brute force: classes are the target bytes that occur.
  std::map<int64_t, std::pair<int64_t, int64_t>> count_before;  // byte → (correct, count)
  double loss_before = 0;
  for (int64_t k = 0; k < set.tokens(); ++k) {
    auto& c = count_before[set.target(k)];
    c.first += before.predictions[k] == set.target(k);
    ++c.second;
    loss_before += before.losses[k];
  }
  const auto& b = engine.baseline();
  ASSERT_EQ(b.class_tokens.size(), count_before.size());
  size_t i = 0;
  for (const auto& [byte, c] : count_before) {
    EXPECT_EQ(b.class_tokens[i], byte);
    EXPECT_EQ(b.before.correct[i], c.first);
    EXPECT_EQ(b.before.count[i], c.second);
    ++i;
  }
  EXPECT_NEAR(b.loss_before, loss_before / set.tokens(), 1e-10);
  EXPECT_GT(b.before.overall, 0.05);  // some correct predictions, so d can be non-zero

  bool some_effect = false;
  for (int64_t e = 0; e < gpt->config().experts; ++e) {
    const auto r = engine.ablate({e}, AblationMethod::Sparse);
    const auto ref = reference(gpt, set, layer, {e});
    std::vector<double> d;
    double loss_after = 0;
    for (const auto& [byte, c] : count_before) {
      int64_t correct = 0;
      for (int64_t k = 0; k < set.tokens(); ++k) correct += set.target(k) == byte && ref.predictions[k] == byte;
      const double acc0 = static_cast<double>(c.first) / c.second, acc1 = static_cast<double>(correct) / c.second;
      d.push_back(acc0 > 0 ? (acc0 - acc1) / acc0 : 0.0);
    }
    for (auto l : ref.losses) loss_after += l;
    const auto& o = r.experts.at(0);
    ASSERT_EQ(o.outcome.drop.size(), d.size());
    for (size_t c = 0; c < d.size(); ++c) EXPECT_NEAR(o.outcome.drop[c], d[c], 1e-12);
    const auto top = std::max_element(d.begin(), d.end()) - d.begin();
    double p = 0;
    for (size_t c = 0; c < d.size(); ++c) p += std::pow(d[c] - (static_cast<int64_t>(c) == top ? 1.0 : 0.0), 2);
    EXPECT_NEAR(o.outcome.polysemanticity, std::sqrt(p), 1e-12);
    EXPECT_NEAR(o.loss_after, loss_after / set.tokens(), 1e-10);
    some_effect |= o.outcome.has_effect;
  }
  EXPECT_TRUE(some_effect);
}

// The extraction's next-token outcomes, computed a few rows at a time, are the GPT's own
// forward's (whole logits, its cross-entropy and argmax); and the extraction reads an eval-mode
// model of the asked dtype in place but copies any other.
TEST(LmForward, OutcomesInPiecesAreTheWholeLogitsOnes) {
  auto gpt = small_gpt(nn::Factorization::CP, 21, 256);
  const auto set = small_set(256);
  torch::NoGradGuard no_grad;
  const auto ids = torch::tensor(std::vector<int64_t>(set.stream.begin(), set.stream.begin() + set.tokens()))
                       .view({set.sequences, set.block_size});
  const auto targets = torch::tensor(std::vector<int64_t>(set.stream.begin() + 1, set.stream.begin() + set.tokens() + 1))
                           .view({set.sequences, set.block_size});
  const auto logits = gpt->forward(ids).logits.reshape({-1, 256});
  const auto expected_losses = torch::cross_entropy_loss(logits, targets.reshape({-1}), {}, at::Reduction::None);
  const auto pass = forward_at_layer(gpt, ids, 1, /*with_logits=*/false);
  EXPECT_FALSE(pass.logits.defined());
  for (int64_t piece_bytes : {int64_t{1}, int64_t{7 * 256 * 4}, kOutcomePieceBytes}) {  // 1 row, 7 rows, all
    const auto outcomes = next_token_outcomes(gpt, pass.final_stream, targets, piece_bytes);
    ASSERT_EQ(outcomes.losses.numel(), set.tokens());
    EXPECT_TRUE(torch::allclose(outcomes.losses, expected_losses, 1e-6, 1e-6)) << piece_bytes;
    EXPECT_TRUE(torch::equal(outcomes.predictions, logits.argmax(-1))) << piece_bytes;
  }
  EXPECT_THROW(next_token_outcomes(gpt, pass.final_stream, targets.slice(0, 1)), UsageError);

  EXPECT_EQ(gpt_for_eval(gpt, torch::kFloat32, torch::kCPU).ptr(), gpt.ptr());
  EXPECT_NE(gpt_for_eval(gpt, torch::kFloat64, torch::kCPU).ptr(), gpt.ptr());
  gpt->train();
  auto copy = gpt_for_eval(gpt, torch::kFloat32, torch::kCPU);
  EXPECT_NE(copy.ptr(), gpt.ptr());
  EXPECT_FALSE(copy->is_training());
  EXPECT_TRUE(gpt->is_training());  // the user's model is left as it was
  gpt->eval();
  // Every tensor of the copy (built without its random draws) holds the model's values.
  EXPECT_TRUE(torch::equal(copy->forward(ids).logits, gpt->forward(ids).logits));
}

TEST(LmEvalSet, SequencesTileTheStreamAndContextStaysInItsDocument) {
  std::vector<int32_t> stream;
  for (unsigned char ch : std::string("ab\ncdef\nghij\n")) stream.push_back(ch);
  const auto set = make_lm_eval_set(stream, {0, 3, 8}, 4, 0, "x");
  EXPECT_EQ(set.sequences, 3);  // (13 - 1) / 4
  EXPECT_EQ(set.target(11), '\n');
  const auto c = token_context(set, 4, 3);  // 'd' in document "cdef\n"
  EXPECT_EQ(c.before, "c");
  EXPECT_EQ(c.token, "d");
  EXPECT_EQ(c.after, "ef\\n");
  EXPECT_THROW(make_lm_eval_set(stream, {0}, 40, 0, "x"), UsageError);
  EXPECT_EQ(gpt_layer_index("transformer.h.2.mlp.MuMoE_layer", 4), 2);
  EXPECT_EQ(gpt_layer_index("3", 4), 3);
  EXPECT_THROW(gpt_layer_index("transformer.h.4.mlp.MuMoE_layer", 4), UsageError);
  EXPECT_THROW(gpt_layer_index("head", 4), UsageError);
}

// The session end to end on a model file and a text directory: per-token extraction into the
// cache (with cancel and resume), token galleries against brute force over a plain forward
// pass, and answers served from the cache the second time.
TEST(TextAnalysisSession, GalleriesAndAblationsFromTheCache) {
  testkit::TempDir dir;
  const auto gpt = small_gpt(nn::Factorization::CP, 7, 256);
  const auto model_path = dir.file("gpt.safetensors");
  model::save_gpt(model_path, gpt, model::gpt_manifest(gpt, {{"seed", 0}, {"validation_fraction", 0.5}}));
  std::filesystem::create_directories(dir.file("docs"));
  const std::vector<std::string> docs = {"the cat sat on the mat", "the dog sat on the log", "a frog ran to the cat",
                                         "the cat and the dog met", "on the log sat a frog", "the mat, the log, the cat"};
  for (size_t i = 0; i < docs.size(); ++i)
    testkit::write_bytes(dir.file("docs/" + std::to_string(i) + ".txt"), docs[i]);
  TextSessionOptions o;
  o.model_path = model_path;
  o.data_spec = "text:" + dir.file("docs");
  o.layer = "transformer.h.1.mlp.MuMoE_layer";
  o.cache_path = dir.file("cache.sqlite");
  o.max_sequences = 0;
  o.sequences_per_chunk = 3;  // a chunk is two forwards (the extraction runs 2 sequences at a time)
  o.chunk_batching = kCommitEachChunk;  // quick chunks: the cancel below must leave some to compute
  auto session = TextAnalysisSession::open(o);
  const auto& set = session->eval_set();
  ASSERT_GE(set.sequences, 4);
  EXPECT_EQ(session->layer_index(), 1);

  // Cancel after the first chunk, then resume.
  EXPECT_THROW(session->extract([](const ExtractionProgress&) { return false; }), Cancelled);
  EXPECT_FALSE(session->extracted());
  const auto resumed = session->extract();
  EXPECT_EQ(resumed.chunks_reused, 1);
  EXPECT_GE(resumed.chunks_computed, 1);
  EXPECT_TRUE(session->extracted());

  // The extraction is float32: predictions, supports and orders equal the GPT's own float32
  // forward; losses and coefficients are the float64 model's to float32 accuracy (1e-5 relative).
  const auto ref = reference(gpt, set, 1, {}, torch::kFloat32);
  const auto ref64 = reference(gpt, set, 1, {});
  const auto& run = session->run();
  ASSERT_EQ(run.samples(), set.tokens());
  for (int64_t k = 0; k < set.tokens(); ++k) {
    ASSERT_EQ(run.labels[k], set.target(k));
    ASSERT_EQ(run.predictions[k], ref.predictions[k]);
    ASSERT_NEAR(run.scores[k], ref64.losses[k], 1e-5 * std::max(1.0, std::abs(ref64.losses[k])));
  }
  const int64_t experts = session->expert_count();
  for (int64_t e = 0; e < experts; ++e) {
    // Brute force: tokens with a_e > 0 sorted by a_e descending (ties: lower index first).
    std::vector<std::pair<double, int64_t>> support;
    int64_t above = 0;
    for (int64_t k = 0; k < set.tokens(); ++k) {
      const double a = ref.coefficients[k][e].item<double>();
      if (a > 0) support.emplace_back(-a, k);
      above += a >= 0.5;
    }
    std::sort(support.begin(), support.end());
    GalleryRequest top;
    top.expert = e;
    top.order = GalleryOrder::Top;
    top.count = 5;
    const auto g = session->gallery(top, 4).value;
    ASSERT_EQ(g.eligible, static_cast<int64_t>(support.size()));
    ASSERT_EQ(g.items.size(), std::min<size_t>(5, support.size()));
    for (size_t i = 0; i < g.items.size(); ++i) {
      const auto& item = g.items[i];
      EXPECT_EQ(item.token, support[i].second);
      EXPECT_NEAR(item.coefficient, -support[i].first, 1e-6);
      EXPECT_NEAR(item.coefficient, ref64.coefficients[item.token][e].item<double>(), 1e-5);
      EXPECT_EQ(item.sequence * set.block_size + item.position, item.token);
      EXPECT_EQ(item.token_id, set.stream[item.token]);
      // Context: ±4 bytes around the token, clipped to its document (documents end in "\n").
      const int64_t doc = set.document_of(item.token);
      const int64_t lo = std::max(set.document_starts[doc], item.token - 4);
      const int64_t hi = std::min<int64_t>(doc + 1 < static_cast<int64_t>(set.document_starts.size())
                                               ? set.document_starts[doc + 1]
                                               : static_cast<int64_t>(set.stream.size()),
                                           item.token + 5);
      std::string before, token, after;
      for (int64_t k = lo; k < hi; ++k)
        (k < item.token ? before : k == item.token ? token : after) += static_cast<char>(set.stream[k]);
      EXPECT_EQ(item.context.before, text::escape_for_display(before));
      EXPECT_EQ(item.context.token, text::escape_for_display(token));
      EXPECT_EQ(item.context.after, text::escape_for_display(after));
    }
    GalleryRequest random;
    random.expert = e;
    random.count = 3;
    random.seed = 11;
    const auto r = session->gallery(random, 4);
    EXPECT_FALSE(r.from_cache);
    EXPECT_EQ(r.value.eligible, above);
    std::set<int64_t> distinct;
    for (const auto& item : r.value.items) {
      EXPECT_GE(ref.coefficients[item.token][e].item<double>(), 0.5);
      distinct.insert(item.token);
    }
    EXPECT_EQ(distinct.size(), std::min<size_t>(3, above));
    const auto again = session->gallery(random, 4);
    EXPECT_TRUE(again.from_cache);
    EXPECT_EQ(to_json(again.value), to_json(r.value));
  }
  GalleryRequest widest;
  widest.order = GalleryOrder::Top;
  for (int64_t e = 0; e < experts; ++e)
    if (run.columns[0].support(e) > run.columns[0].support(widest.expert)) widest.expert = e;
  const auto shown = session->gallery(widest, 4).value;
  const auto rendered = render_token_gallery(shown);
  ASSERT_FALSE(shown.items.empty());
  EXPECT_NE(rendered.find("«" + shown.items[0].context.token + "»"), std::string::npos);

  // Ablations: computed once, then read back equal from the cache (a new session too).
  const auto first = session->ablate({1, 2});
  EXPECT_FALSE(first.from_cache);
  auto reopened = TextAnalysisSession::open(o);
  const auto second = reopened->ablate({1, 2});
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(to_json(second.value).dump(), to_json(first.value).dump());
  const auto ref12 = reference(gpt, set, 1, {1, 2});
  int64_t correct = 0;
  for (int64_t k = 0; k < set.tokens(); ++k) correct += ref12.predictions[k] == set.target(k);
  EXPECT_NEAR(first.value.experts.at(0).outcome.after.overall, static_cast<double>(correct) / set.tokens(), 1e-12);
  const auto sweep = reopened->sweep();
  EXPECT_FALSE(sweep.from_cache);
  EXPECT_EQ(sweep.value.experts.size(), static_cast<size_t>(experts));
  EXPECT_TRUE(reopened->sweep().from_cache);
}

}  // namespace
