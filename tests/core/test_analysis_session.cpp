// The analysis session over the SQLite cache: a second run computes nothing, a changed model
// invalidates only its own run, a cancelled extraction resumes where it stopped and gives the
// same result as an uninterrupted one, answers come back from the cache, and an unusable cache
// file is set aside rather than used.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <future>
#include <mutex>
#include <thread>
#include <utility>

#include "analysis/analysis_session.h"
#include "analysis/chunked_run.h"
#include "analysis/extraction.h"
#include "analysis/tensor_records.h"
#include "analysis_fixture.h"
#include "data/dataset.h"
#include "data/image_data.h"
#include "io/errors.h"
#include "io/safetensors.h"
#include "model/classifier_model.h"
#include "model/model_file.h"
#include "temp_dir.h"

using namespace mumoe;
using namespace mumoe::analysis;

namespace {

class Session : public ::testing::Test {
 protected:
  void SetUp() override {
    fixture_ = testkit::write_analysis_fixture(dir_.path().string(),
                                               testkit::head_config(nn::Factorization::CP, {16}, 4), 250, 5);
    options_.model_path = fixture_.model_path;
    options_.data_spec = "features:" + fixture_.features_path;
    options_.cache_path = dir_.file("cache/analysis.sqlite");  // the directory does not exist yet
    options_.chunk_size = 40;                                 // 7 chunks, the last one short
  }
  testkit::TempDir dir_;
  testkit::AnalysisFixture fixture_;
  SessionOptions options_;
};

TEST_F(Session, SecondRunComputesNothing) {
  auto first = AnalysisSession::open(options_);
  EXPECT_TRUE(first->cache_report().created);
  EXPECT_FALSE(first->extracted());
  const auto a = first->extract();
  EXPECT_EQ(a.chunks_computed, 7);
  EXPECT_EQ(a.chunks_reused, 0);
  const auto run1 = first->run();
  first.reset();

  auto second = AnalysisSession::open(options_);
  EXPECT_FALSE(second->cache_report().created);
  EXPECT_TRUE(second->extracted());
  const auto b = second->extract();
  EXPECT_EQ(b.chunks_computed, 0);
  EXPECT_EQ(b.run_id, a.run_id);
  const auto& run2 = second->run();
  EXPECT_EQ(run2.predictions, run1.predictions);
  EXPECT_EQ(run2.coefficients[0].values, run1.coefficients[0].values);
  EXPECT_EQ(run2.inputs, run1.inputs);
  EXPECT_EQ(run2.attributes.size(), 250u * 2);
}

// A head without backbone reads the data's features as they are: the cache stores none of them
// (they were half of what such a run wrote), and the run reads them from the data set.
TEST_F(Session, ABareHeadsInputsComeFromItsDataNotTheCache) {
  auto s = AnalysisSession::open(options_);
  const auto id = s->extract().run_id;
  const auto& run = s->run();
  const auto features = io::SafetensorsFile::open(fixture_.features_path).read("features").to(torch::kFloat32);
  ASSERT_EQ(run.inputs.size(), static_cast<size_t>(features.numel()));
  EXPECT_TRUE(torch::equal(torch::from_blob(const_cast<float*>(run.inputs.data()), features.sizes(), torch::kFloat32),
                           features));
  s.reset();
  const auto cache = cache::AnalysisCache::open(options_.cache_path);
  for (int64_t c = 0; c < 7; ++c) EXPECT_TRUE(cache->get_chunk(id, c).inputs.empty()) << "chunk " << c;
  // Without the data a loader cannot make up the inputs: a clear error, not a run without them.
  try {
    load_run_data(*cache, id);
    ADD_FAILURE() << "expected a FileError";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("chunk 0 stores no layer inputs"), std::string::npos) << e.what();
  }
}

TEST_F(Session, StoredCoefficientsAreTheModelsOwnAndScoresTheFloat64Layer) {
  auto s = AnalysisSession::open(options_);
  s->extract();
  const auto& run = s->run();
  const auto file = model::ModelFile::load(fixture_.model_path);
  auto model_layer = file.build_layer("head", torch::kFloat32);  // the model as users run it
  auto wide_layer = file.build_layer("head", torch::kFloat64);
  const auto inputs = torch::from_blob(const_cast<float*>(run.inputs.data()), {250, 12}, torch::kFloat32);
  torch::NoGradGuard no_grad;
  int64_t nonzero = 0;
  // Chunk by chunk, as extraction does: the gates in float32, exactly the model's coefficients;
  // the expert arithmetic in float64 from them (here through the dense product; extraction sums
  // over the non-zero coefficients, so the scores agree to rounding).
  for (int64_t begin = 0; begin < 250; begin += 40) {
    const int64_t end = std::min<int64_t>(250, begin + 40);
    const auto rows = inputs.slice(0, begin, end);
    const auto a = model_layer->forward(rows).coefficients[0];
    const auto expected = wide_layer->output_from_coefficients(rows.to(torch::kFloat64), {a.to(torch::kFloat64)});
    for (int64_t i = 0; i < end - begin; ++i) {
      const int64_t sample = begin + i;
      EXPECT_EQ(expected[i].argmax().item<int64_t>(), run.predictions[sample]);
      for (int64_t c = 0; c < 4; ++c)
        EXPECT_NEAR(expected[i][c].item<double>(), run.scores[sample * 4 + c], 1e-12);
      // The stored coefficients are the float32 gate's values, bit for bit (widened exactly).
      const auto& rows_csr = run.coefficients[0];
      std::vector<double> dense(16, 0.0);
      for (int64_t k = rows_csr.offsets[sample]; k < rows_csr.offsets[sample + 1]; ++k)
        dense[rows_csr.indices[k]] = rows_csr.values[k];
      for (int64_t n = 0; n < 16; ++n) {
        const float model_value = a[i][n].item<float>();
        nonzero += model_value > 0;
        EXPECT_EQ(dense[n], static_cast<double>(model_value)) << "sample " << sample << ", expert " << n;
      }
    }
  }
  EXPECT_GT(nonzero, 250);  // the gates are not trivially zero
}

// A softmax-gated CP head (16 experts, 4 classes) on 250 samples in `dir`, read in 7 chunks of 40.
SessionOptions softmax_head_session(const testkit::TempDir& dir) {
  auto config = testkit::head_config(nn::Factorization::CP, {16}, 4);
  config.gate_activation = nn::GateActivationKind::Softmax;
  const auto fixture = testkit::write_analysis_fixture(dir.path().string(), config, 250, 9);
  SessionOptions options;
  options.model_path = fixture.model_path;
  options.data_spec = "features:" + fixture.features_path;
  options.cache_path = dir.file("analysis.sqlite");
  options.chunk_size = 40;  // 7 chunks
  return options;
}

// A softmax gate's coefficients (every one > 0) are not stored but left to the model: each chunk
// keeps their checksum only, and loading the run recomputes them — still the model's float32
// values bit for bit, checked against the layer run here as users run it. A checksum that does
// not match (a cache from another machine) makes loading extract that chunk again; without the
// model, a loader cannot make them up; a run's shapes that are not the model's are damage.
TEST(SessionSoftmax, ADenseGatesCoefficientsAreLeftToTheModelAndRecomputedExactly) {
  testkit::TempDir dir;
  const auto options = softmax_head_session(dir);
  const auto fixture_path = options.data_spec.substr(9);
  int64_t id = 0;
  {
    auto s = AnalysisSession::open(options);
    id = s->extract().run_id;
  }
  {
    const auto cache = cache::AnalysisCache::open(options.cache_path);
    for (int64_t c = 0; c < 7; ++c) {
      const auto chunk = cache->get_chunk(id, c);
      ASSERT_EQ(chunk.left_to_model.size(), 1u) << "chunk " << c;
      EXPECT_NE(chunk.left_to_model[0], 0u) << "chunk " << c;
      EXPECT_TRUE(chunk.coefficients[0].values.empty()) << "chunk " << c;
      EXPECT_EQ(chunk.coefficients[0].offsets.back(), chunk.count * 16) << "chunk " << c;
    }
    try {
      load_run_data(*cache, id);
      ADD_FAILURE() << "expected a FileError";
    } catch (const FileError& e) {
      EXPECT_NE(std::string(e.what()).find("chunk 0 stores no layer inputs"), std::string::npos) << e.what();
    }
  }

  auto session = AnalysisSession::open(options);
  const auto& run = session->run();
  auto model_layer = model::ModelFile::load(options.model_path).build_layer("head", torch::kFloat32);
  const auto features = io::SafetensorsFile::open(fixture_path).read("features").to(torch::kFloat32);
  torch::NoGradGuard no_grad;
  const auto& rows = run.coefficients[0];
  ASSERT_EQ(rows.values.size(), 250u * 16);
  const auto rows_before = rows.values;
  for (int64_t begin = 0; begin < 250; begin += 40) {
    const auto a = model_layer->forward(features.slice(0, begin, std::min<int64_t>(250, begin + 40))).coefficients[0];
    for (int64_t i = 0; i < a.size(0); ++i)
      for (int64_t n = 0; n < 16; ++n) {
        const int64_t k = (begin + i) * 16 + n;
        ASSERT_EQ(rows.indices[k], n);
        ASSERT_EQ(rows.values[k], static_cast<double>(a[i][n].item<float>())) << "sample " << begin + i << ", expert " << n;
      }
  }
  // The columns (every sample in every expert's) hold the same values.
  for (int64_t n = 0; n < 16; n += 5) {
    ASSERT_EQ(run.columns[0].support(n), 250);
    for (int64_t s = 0; s < 250; s += 17)
      EXPECT_EQ(run.columns[0].values[run.columns[0].offsets[n] + s], rows.values[s * 16 + n]);
  }
  const auto predictions = run.predictions;
  session.reset();

  const auto sql = [&](const std::string& statement, const void* blob = nullptr, int bytes = 0) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(options.cache_path.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* s = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, statement.c_str(), -1, &s, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    if (blob) sqlite3_bind_blob(s, 1, blob, bytes, SQLITE_TRANSIENT);
    EXPECT_EQ(sqlite3_step(s), SQLITE_DONE) << sqlite3_errmsg(db);
    sqlite3_finalize(s);
    sqlite3_close(db);
  };
  const auto checksum_of_chunk = [&](int64_t c) {
    return cache::AnalysisCache::open(options.cache_path)->get_chunk(id, c).left_to_model.at(0);
  };
  // Chunk 2's checksum as other arithmetic (another machine's kernels) would have left it: a
  // cache miss — loading extracts that chunk again, on this CPU, now with its coefficients
  // stored (so that reading it no longer depends on reproducing them, issue 45), and reads the
  // same run.
  sql("UPDATE chunks SET coef_left_to_model = x'0100000000000000' WHERE chunk_index = 2");
  ASSERT_EQ(checksum_of_chunk(2), 1u);
  session = AnalysisSession::open(options);
  EXPECT_EQ(session->run().predictions, predictions);
  EXPECT_EQ(session->run().coefficients[0].values, rows_before);
  session.reset();
  {
    const auto chunk = cache::AnalysisCache::open(options.cache_path)->get_chunk(id, 2);
    EXPECT_FALSE(chunk.leaves_modes_to_model());
    EXPECT_EQ(chunk.coefficients[0].values.size(), 40u * 16);
  }

  // A runs row whose shapes are not the model's (its expert count and the left mode's offsets
  // rewritten to agree with each other): damage, named with the remedy — not coefficients of
  // another shape handed to the analyses.
  sql("UPDATE runs SET expert_dims = '[8]'");
  for (int64_t c = 0; c < 7; ++c) {
    const int64_t count = c < 6 ? 40 : 10;
    std::vector<int64_t> offsets;
    for (int64_t i = 0; i <= count; ++i) offsets.push_back(i * 8);
    sql("UPDATE chunks SET coef_offsets = ?1 WHERE chunk_index = " + std::to_string(c), offsets.data(),
        static_cast<int>(offsets.size() * sizeof(int64_t)));
  }
  session = AnalysisSession::open(options);
  try {
    session->run();
    ADD_FAILURE() << "expected a FileError";
  } catch (const FileError& e) {
    EXPECT_EQ(e.path(), options.cache_path);
    EXPECT_NE(std::string(e.what()).find("chunk 0: leaves coefficients to the model, but the model's layer does not "
                                         "have the run's shapes"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("mumoe cache repair"), std::string::npos) << e.what();
  }
}

// A run of `samples` samples in chunks of 10 (3 inputs, 2 scores, 4 experts) for the chunked-run
// tests, and a chunk record of it with `rows` samples (10 matches the run's shapes).
const cache::RunKey kSmallRunKey{"hash", "model.safetensors", "features:x", "hash2", "head", "{}"};

cache::RunInfo small_run_info(int64_t samples) {
  cache::RunInfo info;
  info.sample_count = samples;
  info.chunk_size = 10;
  info.input_dim = 3;
  info.output_dim = 2;
  info.expert_dims = {4};
  return info;
}

cache::ChunkRecord small_chunk(int64_t c, int64_t rows = 10) {
  return analysis::make_chunk_record(c, c * 10, torch::randn({rows, 3}), torch::zeros({rows}, torch::kLong),
                                     torch::randn({rows, 2}), {torch::rand({rows, 4})}, torch::Tensor());
}

TEST(ChunkedRun, AFailedWriteStopsTheRunAndKeepsEveryChunkReportedStored) {
  // Chunks are written on a second thread while the next one computes (chunked_run.cpp): the
  // write of chunk 3 fails (its record does not match the run's shapes), so the run stops with
  // that error, chunks 0–2 are stored and were reported, and nothing after chunk 3 is stored.
  testkit::TempDir dir;
  auto cache = cache::AnalysisCache::open(dir.file("cache.sqlite"));
  const auto info = small_run_info(60);
  torch::manual_seed(1);
  // Chunk 3 is one sample short: put_chunk refuses it.
  const auto chunk = [](int64_t c) { return small_chunk(c, c == 3 ? 9 : 10); };
  std::vector<int64_t> reported;
  EXPECT_THROW(analysis::fill_chunked_run(*cache, kSmallRunKey, info, chunk,
                                          [&](const analysis::ExtractionProgress& p) {
                                            reported.push_back(p.chunks_done);
                                            return true;
                                          }),
               UsageError);
  EXPECT_EQ(reported, (std::vector<int64_t>{1, 2, 3}));
  const auto run = cache->find_run(kSmallRunKey);
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(cache->chunk_indices(*run), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_FALSE(cache->run_complete(*run));
  // Resuming with good chunks computes only the missing ones and completes the run.
  int64_t computed = 0;
  const auto good = [&](int64_t c) {
    ++computed;
    return small_chunk(c);
  };
  std::vector<double> etas;
  const auto summary = analysis::fill_chunked_run(*cache, kSmallRunKey, info, good, [&](const analysis::ExtractionProgress& p) {
    etas.push_back(p.eta_seconds);
    return true;
  });
  EXPECT_EQ(computed, 3);
  // The three chunks found in the cache come first, before any time per computed chunk is known:
  // no ETA (issue 46: "ETA 0.0 s" at 50 %); then one, 0 at the end.
  ASSERT_EQ(etas.size(), 6u);
  for (size_t i = 0; i < 3; ++i) EXPECT_LT(etas[i], 0) << "report " << i;
  for (size_t i = 3; i < 6; ++i) EXPECT_GE(etas[i], 0) << "report " << i;
  EXPECT_EQ(etas.back(), 0);
  EXPECT_EQ(summary.chunks_reused, 3);
  EXPECT_TRUE(cache->run_complete(*run));
}

TEST(ChunkedRun, CancellingStoresNothingAfterTheChunkItWasToldAbout) {
  testkit::TempDir dir;
  auto cache = cache::AnalysisCache::open(dir.file("cache.sqlite"));
  const auto chunk = [](int64_t c) { return small_chunk(c); };
  EXPECT_THROW(analysis::fill_chunked_run(*cache, kSmallRunKey, small_run_info(50), chunk,
                                          [](const analysis::ExtractionProgress& p) { return p.chunks_done < 2; },
                                          analysis::kCommitEachChunk),
               Cancelled);
  const auto run = cache->find_run(kSmallRunKey);
  ASSERT_TRUE(run.has_value());
  // Chunks 0 and 1 were reported stored; chunk 2 was computed before the cancel was seen and is
  // not stored, nor is anything after it.
  EXPECT_EQ(cache->chunk_indices(*run), (std::vector<int64_t>{0, 1}));
}

// Chunks are committed in batches (ChunkBatching): each report comes once its chunk and every one
// before it are stored for good (another connection sees them), in order also around a chunk the
// cache held already (a batch ends before it); a commit per chunk (a slow start, or a batch's
// time up) stores nothing beyond the reported chunk when it is reported; a failed write in a batch keeps
// and reports the chunks before it; a cancel at a batch's report keeps the batch.
TEST(ChunkedRun, BatchedChunksAreReportedInOrderOnceCommitted) {
  struct Case {
    analysis::ChunkBatching batching;
    std::vector<int64_t> seen_at_first_report;  // what another connection holds then
  };
  const std::vector<Case> cases = {
      {{60, 60, {}}, {0, 1, 2, 3}},  // batches end before a stored chunk and after the last
      {{60, 0, {}}, {0, 3}},         // every start "slow": committed chunk by chunk (3 was there)
      {{0, 60, {}}, {0, 3}},         // every batch "old": likewise
  };
  for (const auto& k : cases) {
    testkit::TempDir dir;
    const auto path = dir.file("cache.sqlite");
    auto cache = cache::AnalysisCache::open(path);
    const auto info = small_run_info(60);
    const int64_t run = cache->begin_run(kSmallRunKey, info);
    cache->put_chunk(run, small_chunk(3));  // a chunk from an earlier extraction
    auto reader = cache::AnalysisCache::open(path);
    std::vector<int64_t> reported;
    std::vector<int64_t> first_seen;
    const auto progress = [&](const analysis::ExtractionProgress& p) {
      reported.push_back(p.chunks_done);
      const auto seen = reader->chunk_indices(run);
      if (reported.size() == 1) first_seen = seen;
      for (int64_t c = 0; c < p.chunks_done; ++c)
        EXPECT_TRUE(std::count(seen.begin(), seen.end(), c)) << "chunk " << c << " reported, not stored";
      return true;
    };
    const auto summary = analysis::fill_chunked_run(
        *cache, kSmallRunKey, info, [](int64_t c) { return small_chunk(c); }, progress, k.batching);
    EXPECT_EQ(reported, (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
    EXPECT_EQ(first_seen, k.seen_at_first_report) << k.batching.batch_seconds;
    EXPECT_EQ(summary.chunks_reused, 1);
    EXPECT_TRUE(cache->run_complete(run));
  }

  // A failed write (chunk 3 is a sample short) in one batch: chunks 0–2 are committed and reported
  // before the error, nothing after them stored.
  {
    testkit::TempDir dir;
    auto cache = cache::AnalysisCache::open(dir.file("cache.sqlite"));
    std::vector<int64_t> reported;
    EXPECT_THROW(analysis::fill_chunked_run(
                     *cache, kSmallRunKey, small_run_info(60),
                     [](int64_t c) { return small_chunk(c, c == 3 ? 9 : 10); },
                     [&](const analysis::ExtractionProgress& p) {
                       reported.push_back(p.chunks_done);
                       return true;
                     },
                     {60, 60, {}}),
                 UsageError);
    EXPECT_EQ(reported, (std::vector<int64_t>{1, 2, 3}));
    EXPECT_EQ(cache->chunk_indices(*cache->find_run(kSmallRunKey)), (std::vector<int64_t>{0, 1, 2}));
  }
  // A cancel at the first report of one batch: the batch (the whole run) stays stored, incomplete.
  {
    testkit::TempDir dir;
    auto cache = cache::AnalysisCache::open(dir.file("cache.sqlite"));
    EXPECT_THROW(analysis::fill_chunked_run(
                     *cache, kSmallRunKey, small_run_info(40), [](int64_t c) { return small_chunk(c); },
                     [](const analysis::ExtractionProgress&) { return false; }, {60, 60, {}}),
                 Cancelled);
    const auto run = *cache->find_run(kSmallRunKey);
    EXPECT_EQ(cache->chunk_indices(run), (std::vector<int64_t>{0, 1, 2, 3}));
    EXPECT_FALSE(cache->run_complete(run));
  }
}

// A shard (ChunkBatching::shard) computes only its contiguous chunks, counts only those in its
// progress, marks itself, and leaves the run partial until every shard's chunks are there.
TEST(ChunkedRun, AShardComputesOnlyItsChunks) {
  testkit::TempDir dir;
  auto cache = cache::AnalysisCache::open(dir.file("cache.sqlite"));
  const auto info = small_run_info(75);  // 8 chunks: shards of 3 hold 0–1, 2–4, 5–7
  std::vector<int64_t> computed, reported;
  analysis::ChunkBatching batching;
  batching.shard = {1, 3};
  const auto summary = analysis::fill_chunked_run(
      *cache, kSmallRunKey, info,
      [&](int64_t c) {
        computed.push_back(c);
        return small_chunk(c, c == 7 ? 5 : 10);
      },
      [&](const analysis::ExtractionProgress& p) {
        EXPECT_EQ(p.chunks_total, 3);
        EXPECT_EQ(p.samples_total, 30);
        reported.push_back(p.samples_done);
        return true;
      },
      batching);
  EXPECT_EQ(computed, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(reported.back(), 30);
  EXPECT_FALSE(cache->run_complete(summary.run_id));
  EXPECT_TRUE(cache->get_result(summary.run_id, analysis::kShardResultKind, "1/3").has_value());
  for (const int64_t k : {0, 2}) {
    batching.shard = {k, 3};
    analysis::fill_chunked_run(*cache, kSmallRunKey, info, [&](int64_t c) { return small_chunk(c, c == 7 ? 5 : 10); },
                               {}, batching);
  }
  EXPECT_TRUE(cache->run_complete(summary.run_id));
  batching.shard = {3, 3};
  EXPECT_THROW(analysis::fill_chunked_run(*cache, kSmallRunKey, info, [&](int64_t c) { return small_chunk(c); }, {},
                                          batching),
               UsageError);
}

// Two stages (extraction's gates, then its float64 arithmetic and record): chunk c's finishing
// stage runs on another thread while chunk c + 1 starts; a finishing stage's error ends the run
// with the chunks before it stored and reported; a cancel leaves the chunk in hand unfinished.
TEST(ChunkedRun, TwoStagesFinishEachChunkOnTheWriterThreadWhileTheNextStarts) {
  testkit::TempDir dir;
  auto cache = cache::AnalysisCache::open(dir.file("cache.sqlite"));
  torch::manual_seed(2);
  const int64_t chunks = 5;
  std::vector<std::promise<void>> started(chunks);
  std::vector<std::future<void>> started_seen;
  for (auto& p : started) started_seen.push_back(p.get_future());
  std::mutex m;
  std::vector<int64_t> finished;
  std::vector<bool> beside_next_start(chunks, false);
  const auto caller = std::this_thread::get_id();
  const auto start = [&](int64_t c) -> analysis::FinishChunk {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    started[c].set_value();
    return [&, c] {
      EXPECT_NE(std::this_thread::get_id(), caller);
      // Sequential stages would never see the next start: the wait would time out.
      if (c + 1 < chunks)
        beside_next_start[c] = started_seen[c + 1].wait_for(std::chrono::seconds(5)) == std::future_status::ready;
      const std::lock_guard<std::mutex> lock(m);
      finished.push_back(c);
      return small_chunk(c);
    };
  };
  const auto summary = analysis::fill_chunked_run_in_two_stages(*cache, kSmallRunKey, small_run_info(50), start, {});
  EXPECT_EQ(summary.chunks_computed, chunks);
  EXPECT_EQ(finished, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(beside_next_start, (std::vector<bool>{true, true, true, true, false}));
  EXPECT_TRUE(cache->run_complete(summary.run_id));
}

TEST(ChunkedRun, AFinishingStagesErrorEndsTheRunWithTheChunksBeforeItStored) {
  testkit::TempDir dir;
  auto cache = cache::AnalysisCache::open(dir.file("cache.sqlite"));
  torch::manual_seed(3);
  const auto start = [](int64_t c) -> analysis::FinishChunk {
    return [c]() -> cache::ChunkRecord {
      if (c == 3) throw FileError("model.safetensors", "NaN outputs on samples 30–39");
      return small_chunk(c);
    };
  };
  std::vector<int64_t> reported;
  try {
    analysis::fill_chunked_run_in_two_stages(*cache, kSmallRunKey, small_run_info(60), start,
                                             [&](const analysis::ExtractionProgress& p) {
                                               reported.push_back(p.chunks_done);
                                               return true;
                                             });
    ADD_FAILURE() << "expected a FileError";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("NaN outputs on samples 30–39"), std::string::npos) << e.what();
  }
  EXPECT_EQ(reported, (std::vector<int64_t>{1, 2, 3}));
  const auto run = cache->find_run(kSmallRunKey);
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(cache->chunk_indices(*run), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_FALSE(cache->run_complete(*run));

  // A cancel seen after chunk 2's start: chunk 2 is neither finished nor stored.
  testkit::TempDir other;
  auto second = cache::AnalysisCache::open(other.file("cache.sqlite"));
  std::vector<int64_t> finished;
  const auto counting = [&](int64_t c) -> analysis::FinishChunk {
    return [&, c] {
      finished.push_back(c);  // one finishing stage at a time
      return small_chunk(c);
    };
  };
  EXPECT_THROW(analysis::fill_chunked_run_in_two_stages(
                   *second, kSmallRunKey, small_run_info(50), counting,
                   [](const analysis::ExtractionProgress& p) { return p.chunks_done < 2; }, analysis::kCommitEachChunk),
               Cancelled);
  EXPECT_EQ(finished, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(second->chunk_indices(*second->find_run(kSmallRunKey)), (std::vector<int64_t>{0, 1}));
}

// The float64 expert arithmetic on the writer thread (two stages) or on the calling thread: the
// same chunk records, bit for bit — scores, predictions, stored coefficients and the checksums of
// modes left to the model — for a dense CP head (its input side beside the gates, the rest on the
// writer: ExactLayer::input_side), a dense TR one (all of the arithmetic on the writer) and a
// sparse (entmax) CP one.
TEST(Extraction, TheWriterThreadsArithmeticStoresTheCallingThreadsBits) {
  for (const auto& [factorization, gate] : {std::pair{nn::Factorization::CP, nn::GateActivationKind::Softmax},
                                           std::pair{nn::Factorization::TR, nn::GateActivationKind::Softmax},
                                           std::pair{nn::Factorization::CP, nn::GateActivationKind::Entmax15}}) {
    testkit::TempDir dir;
    auto config = testkit::head_config(factorization, {16}, 4);
    config.gate_activation = gate;
    const auto fixture = testkit::write_analysis_fixture(dir.path().string(), config, 250, 6);
    auto model = model::ClassifierModel::load(model::ModelFile::load(fixture.model_path));
    const auto data = data::load_dataset("features:" + fixture.features_path);
    std::vector<std::vector<cache::ChunkRecord>> runs;
    // The calling thread, then the writer thread with each share of the movable parts (the input
    // side, checksums, score bounds) and with the balance choosing it.
    for (const int share : {-10, -1, 0, 1, 2, ExtractionOptions::kBalancedWriterShare}) {
      const auto where = share == -10 ? ExtractionArithmetic::OnCaller : ExtractionArithmetic::OnWriter;
      ExtractionOptions options;
      options.chunk_size = 40;
      options.arithmetic = where;
      options.writer_share = share;
      auto cache = cache::AnalysisCache::open(dir.file("share" + std::to_string(share) + ".sqlite"));
      const auto key = make_run_key(fixture.model_path, model, data, options);
      const auto summary = extract_run(*cache, key, model, data, options);
      EXPECT_EQ(summary.arithmetic_on_writer, where == ExtractionArithmetic::OnWriter);  // both ways compared
      const auto id = summary.run_id;
      std::vector<cache::ChunkRecord> chunks;
      for (int64_t c = 0; c < 7; ++c) chunks.push_back(cache->get_chunk(id, c));
      runs.push_back(std::move(chunks));
    }
    const bool dense = gate == nn::GateActivationKind::Softmax;
    for (size_t r = 1; r < runs.size(); ++r)
    for (int64_t c = 0; c < 7; ++c) {
      const auto& a = runs[0][c];
      const auto& b = runs[r][c];
      SCOPED_TRACE(std::string(factorization == nn::Factorization::CP ? "CP " : "TR ") +
                   (dense ? "softmax, run " : "entmax, run ") + std::to_string(r) + ", chunk " + std::to_string(c));
      EXPECT_EQ(a.scores, b.scores);  // doubles compared exactly
      EXPECT_EQ(a.predictions, b.predictions);
      EXPECT_EQ(a.labels, b.labels);
      EXPECT_EQ(a.left_to_model, b.left_to_model);
      EXPECT_EQ(a.left_to_model.empty(), !dense);
      ASSERT_EQ(a.coefficients.size(), 1u);
      EXPECT_EQ(a.coefficients[0].offsets, b.coefficients[0].offsets);
      EXPECT_EQ(a.coefficients[0].indices, b.coefficients[0].indices);
      EXPECT_EQ(a.coefficients[0].values, b.coefficients[0].values);
      EXPECT_EQ(a.coefficients[0].values.empty(), dense);
      EXPECT_EQ(a.scores.size(), static_cast<size_t>(a.count * 4));
    }
  }
}

// Issue 45: on some CPUs and BLAS settings (OpenBLAS's Haswell kernels, two threads) recomputing a
// dense gate's coefficients did not give the bits the extraction stored a checksum of, the
// fallback's extraction left them to the model again, and the user got no answer at all. The hook
// stands in for such a BLAS: every recomputation gives other bits. The run still answers, with
// the chunks extracted again and their coefficients stored: the model's own values.
TEST(SessionSoftmax, AMachineWhoseBlasNeverRepeatsItsGatesStillAnswers) {
  testkit::TempDir dir;
  const auto options = softmax_head_session(dir);
  const auto fixture_path = options.data_spec.substr(9);
  struct HookGuard {
    HookGuard() {
      analysis::test_hooks::set_recomputed_gates_hook([](torch::Tensor& values) {
        values = values.clone();
        values.view(-1)[0] += 1e-3;  // other bits, as another partition of the product gives
      });
    }
    ~HookGuard() { analysis::test_hooks::set_recomputed_gates_hook({}); }
  } guard;
  int64_t id = 0;
  {
    auto s = AnalysisSession::open(options);
    id = s->extract().run_id;
  }
  auto session = AnalysisSession::open(options);  // reads the run: every chunk disagrees once
  const auto& rows = session->run().coefficients[0];
  ASSERT_EQ(rows.values.size(), 250u * 16);
  auto model_layer = model::ModelFile::load(options.model_path).build_layer("head", torch::kFloat32);
  const auto features = io::SafetensorsFile::open(fixture_path).read("features").to(torch::kFloat32);
  torch::NoGradGuard no_grad;
  for (int64_t begin = 0; begin < 250; begin += 40) {
    const auto a = model_layer->forward(features.slice(0, begin, std::min<int64_t>(250, begin + 40))).coefficients[0];
    for (int64_t i = 0; i < a.size(0); ++i)
      for (int64_t n = 0; n < 16; ++n)
        ASSERT_EQ(rows.values[(begin + i) * 16 + n], static_cast<double>(a[i][n].item<float>()))
            << "sample " << begin + i << ", expert " << n;
  }
  session.reset();
  const auto cache = cache::AnalysisCache::open(options.cache_path);
  for (int64_t c = 0; c < 7; ++c) {
    const auto chunk = cache->get_chunk(id, c);
    EXPECT_FALSE(chunk.leaves_modes_to_model()) << "chunk " << c;
    EXPECT_EQ(chunk.coefficients[0].values.size(), static_cast<size_t>(chunk.count * 16)) << "chunk " << c;
  }
  EXPECT_NO_THROW(AnalysisSession::open(options)->run());  // and again, now without recomputing
}

// A layer whose outputs are not finite (gates that overflow float32, so softmax gives NaN; the
// loaders refuse NaN weights and features, so this is how a model gets there) is reported from
// the finishing stage, naming the model and the samples; nothing of that chunk is stored.
TEST(SessionSoftmax, NonFiniteOutputsAreReportedWithTheModelAndTheSamples) {
  testkit::TempDir dir;
  auto config = testkit::head_config(nn::Factorization::CP, {16}, 4);
  config.gate_activation = nn::GateActivationKind::Softmax;
  const auto fixture = testkit::write_analysis_fixture(dir.path().string(), config, 250, 4);
  {
    const auto file = model::ModelFile::load(fixture.model_path);
    auto block = file.build_layer("head", torch::kFloat32);
    torch::NoGradGuard no_grad;
    for (auto& p : block->named_parameters())
      if (p.key().rfind("projs.", 0) == 0) p.value().fill_(3e38f);  // x · G overflows for most rows
    const auto manifest = file.manifest();
    model::save_model_file(fixture.model_path, manifest, model::layer_tensors(manifest.layers[0], block));
  }
  SessionOptions options;
  options.model_path = fixture.model_path;
  options.data_spec = "features:" + fixture.features_path;
  options.cache_path = dir.file("analysis.sqlite");
  options.chunk_size = 40;
  auto session = AnalysisSession::open(options);
  try {
    session->extract();
    ADD_FAILURE() << "expected a FileError";
  } catch (const FileError& e) {
    EXPECT_EQ(e.path(), fixture.model_path);
    EXPECT_NE(std::string(e.what()).find("produced NaN or infinite outputs on samples 0–39"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(session->extracted());
  session.reset();
  const auto cache = cache::AnalysisCache::open(options.cache_path);
  for (const auto id : cache->run_ids()) EXPECT_TRUE(cache->chunk_indices(id).empty());
}

TEST_F(Session, AnswersComeBackFromTheCache) {
  auto s = AnalysisSession::open(options_);
  s->extract();
  const auto first = s->ablate(0, {2, 5});
  EXPECT_FALSE(first.from_cache);
  const auto second = s->ablate(0, {2, 5});
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(second.value.after.correct, first.value.after.correct);
  EXPECT_EQ(second.value.after.count, first.value.after.count);
  EXPECT_EQ(second.value.drop, first.value.drop);
  const auto sweep = s->sweep(0);
  const auto sweep_again = s->sweep(0);
  EXPECT_FALSE(sweep.from_cache);
  EXPECT_TRUE(sweep_again.from_cache);
  ASSERT_EQ(sweep_again.value.experts.size(), 16u);
  EXPECT_EQ(sweep_again.value.experts[7].after.per_class, sweep.value.experts[7].after.per_class);
  GalleryRequest g;
  g.expert = 1;
  g.order = GalleryOrder::Top;
  EXPECT_FALSE(s->gallery(g).from_cache);
  EXPECT_TRUE(s->gallery(g).from_cache);
  EXPECT_FALSE(s->statistics(0, 0.5).from_cache);
  EXPECT_TRUE(s->statistics(0, 0.5).from_cache);
  // A new session (a reopened program) gets the stored answers too.
  s.reset();
  auto reopened = AnalysisSession::open(options_);
  EXPECT_TRUE(reopened->ablate(0, {2, 5}).from_cache);
  EXPECT_TRUE(reopened->sweep(0).from_cache);
}

TEST_F(Session, ChangedModelInvalidatesOnlyItsOwnRun) {
  // Another model's run in the same cache must survive.
  testkit::TempDir other_dir;
  const auto other = testkit::write_analysis_fixture(other_dir.path().string(),
                                                     testkit::head_config(nn::Factorization::CP, {8}, 4), 100, 6);
  auto other_options = options_;
  other_options.model_path = other.model_path;
  other_options.data_spec = "features:" + other.features_path;
  AnalysisSession::open(other_options)->extract();

  AnalysisSession::open(options_)->extract();
  // Rewrite the model file with different weights (same path).
  testkit::write_analysis_fixture(dir_.path().string(), testkit::head_config(nn::Factorization::CP, {16}, 4), 250, 77);
  auto changed = AnalysisSession::open(options_);
  EXPECT_FALSE(changed->extracted());
  EXPECT_EQ(changed->extract().chunks_computed, 7);

  auto cache = cache::AnalysisCache::open(options_.cache_path);
  EXPECT_EQ(cache->run_ids().size(), 2u);  // the new run and the other model's, not the stale one
  EXPECT_TRUE(AnalysisSession::open(other_options)->extracted());
}

TEST_F(Session, CancelledExtractionResumesToTheSameResult) {
  {
    auto options = options_;
    options.chunk_batching = analysis::kCommitEachChunk;  // so that the cancel leaves chunks to compute
    auto s = AnalysisSession::open(options);
    int calls = 0;
    EXPECT_THROW(s->extract([&](const ExtractionProgress& p) {
      EXPECT_EQ(p.chunks_total, 7);
      return ++calls < 3;  // cancel after the third chunk
    }),
                 Cancelled);
    EXPECT_FALSE(s->extracted());
    EXPECT_THROW(s->run(), UsageError);
  }
  auto resumed = AnalysisSession::open(options_);
  const auto summary = resumed->extract();
  EXPECT_EQ(summary.chunks_reused, 3);
  EXPECT_EQ(summary.chunks_computed, 4);
  const auto resumed_predictions = resumed->run().predictions;
  const auto resumed_values = resumed->run().coefficients[0].values;

  auto fresh_options = options_;
  fresh_options.cache_path = dir_.file("fresh.sqlite");
  auto fresh = AnalysisSession::open(fresh_options);
  fresh->extract();
  EXPECT_EQ(fresh->run().predictions, resumed_predictions);
  EXPECT_EQ(fresh->run().coefficients[0].values, resumed_values);
}

TEST_F(Session, UnusableCacheFileIsSetAsideAndReported) {
  std::filesystem::create_directories(dir_.path() / "cache");
  testkit::write_bytes(options_.cache_path, std::string(5000, '\x5a'));
  // Set aside because it is in the program's own cache directory; a file elsewhere that is not
  // a cache is refused instead (see the cache's tests).
  ::setenv("MUMOE_CACHE", options_.cache_path.c_str(), 1);
  auto s = AnalysisSession::open(options_);
  ::unsetenv("MUMOE_CACHE");
  EXPECT_TRUE(s->cache_report().set_aside);
  EXPECT_FALSE(s->cache_report().set_aside_reason.empty());
  EXPECT_EQ(testkit::read_bytes(s->cache_report().set_aside_path), std::string(5000, '\x5a'));
  EXPECT_EQ(s->extract().chunks_computed, 7);
}

TEST_F(Session, BadRequestsAreUsageErrors) {
  auto s = AnalysisSession::open(options_);
  EXPECT_THROW(s->ablate(0, {3}), UsageError);  // not extracted yet
  s->extract();
  EXPECT_THROW(s->ablate(0, {16}), UsageError);
  EXPECT_THROW(s->ablate(1, {0}), UsageError);
  EXPECT_THROW(s->ablate(0, {}), UsageError);
  GalleryRequest g;
  g.expert = -1;
  EXPECT_THROW(s->gallery(g), UsageError);
  auto wrong = options_;
  wrong.data_spec = "fashion-mnist:test";  // images for a bare layer (where Debian's data is installed)
  if (std::filesystem::exists(data::kFashionMnistDir)) {
    EXPECT_THROW(AnalysisSession::open(wrong), UsageError);
  }
}

}  // namespace
