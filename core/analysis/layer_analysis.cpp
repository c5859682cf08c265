#include "analysis/layer_analysis.h"

#include <chrono>

#include "analysis/layer_timing.h"
#include "analysis/result_json.h"
#include "analysis/stored_answer.h"
#include "analysis/sweep_shards.h"
#include "cache/cache_repair.h"
#include "io/errors.h"
#include "model/classifier_model.h"
#ifdef MUMOE_WITH_OPENCV
#include "analysis/contact_sheet.h"
#endif

namespace mumoe::analysis {
namespace {

// The contact sheet of either analysis (contact_sheet.h), or the refusal of a build without OpenCV.
template <typename Analysis>
void draw_sheet(const std::string& path, const Analysis& analysis, const Gallery& gallery, const SweepCallback& progress) {
#ifdef MUMOE_WITH_OPENCV
  write_gallery_sheet(path, analysis, gallery, progress);
#else
  (void)path, (void)analysis, (void)gallery, (void)progress;
  throw UsageError("this build has no OpenCV: PNG galleries are not available");
#endif
}

template <typename F>
auto timed(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  Answer<decltype(f())> answer{f(), false, 0};
  answer.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return answer;
}

// A head or bare layer: the cached session answers as it is.
class HeadAnalysis final : public LayerAnalysis {
 public:
  explicit HeadAnalysis(std::unique_ptr<AnalysisSession> session) : session_(std::move(session)) {}
  std::string layer_name() const override { return session_->layer_name(); }
  const std::vector<std::string>& class_names() const override { return session_->class_names(); }
  std::vector<int64_t> expert_dims() const override { return session_->expert_dims(); }
  bool multilabel() const override { return session_->multilabel(); }
  const std::vector<std::string>& attribute_names() const override { return session_->attribute_names(); }
  int64_t samples() const override { return session_->sample_count(); }
  ClassAccuracy accuracy() override { return session_->accuracy(); }
  bool cached() const override { return true; }
  Answer<ModeStatistics> statistics(int64_t mode, double threshold) override { return session_->statistics(mode, threshold); }
  Answer<Gallery> gallery(const GalleryRequest& request) override { return session_->gallery(request); }
  Answer<AblationOutcome> ablate(int64_t mode, const std::vector<int64_t>& experts, AblationMethod method,
                                 const std::function<bool()>&) override {
    return session_->ablate(mode, experts, method);
  }
  const RunData& run() override { return session_->run(); }
  SampleImage image(int64_t sample, int64_t) override { return session_->sample_image(sample); }
  Answer<SweepOutcome> sweep(int64_t mode, AblationMethod method, const SweepCallback& progress, bool recompute) override {
    return session_->sweep(mode, method, progress, recompute);
  }
  bool sweep_is_cheap(int64_t) override { return true; }
  Answer<SweepOutcome> sweep_shard(int64_t, AblationMethod, int64_t, int64_t, const SweepCallback&) override {
    throw UsageError(session_->layer_name() +
                     "'s sweep is answered from its extracted run in seconds; what takes long is the extraction: "
                     "shard that instead (mumoe analyze --shard K/N, or mumoe slurm analyze)");
  }
  void write_gallery_sheet(const std::string& path, const Gallery& gallery, const SweepCallback& progress) override {
    draw_sheet(path, *session_, gallery, progress);
  }
  AnalysisSession* session() override { return session_.get(); }
  model::ModelLayer manifest_layer() const override { return session_->model().manifest_layer(); }
  RowCoverage row_coverage() override {
    const auto& r = session_->run();
    RowCoverage c;
    for (int64_t n = 0; n < r.info.expert_dims.at(0); ++n) c.rows_per_expert.push_back(r.columns.at(0).support(n));
    const auto& rows = r.coefficients.at(0);
    for (int64_t s = 0; s < r.samples(); ++s) c.rows_without_expert += rows.offsets[s] == rows.offsets[s + 1];
    return c;
  }
  double microseconds_per_row() override {
    return stored_inputs_microseconds_per_row(session_->model(), session_->run());
  }
  bool has_images() const override { return session_->has_gallery_images(); }
  std::string cache_path() const override { return session_->cache_path(); }
  std::string cache_note() const override { return cache::opening_note(session_->cache_report()); }

 private:
  std::unique_ptr<AnalysisSession> session_;
};

// A μMoE or router layer inside a ViT or Mixer: one expert mode. Its baseline pass runs at each
// open; its sweeps — the slow answers, which sweep shards merge into (sweep_shards.h) — are kept
// in the analysis cache under the block's run (VitBlockAnalysis::run_key).
class BackboneLayerAnalysis final : public LayerAnalysis {
 public:
  BackboneLayerAnalysis(std::unique_ptr<VitBlockAnalysis> block, std::unique_ptr<cache::AnalysisCache> cache,
                        int64_t run_id, std::string cache_note)
      : block_(std::move(block)), cache_(std::move(cache)), run_id_(run_id), cache_note_(std::move(cache_note)) {}
  std::string layer_name() const override { return block_->layer_name(); }
  const std::vector<std::string>& class_names() const override { return block_->class_names(); }
  std::vector<int64_t> expert_dims() const override { return {block_->experts()}; }
  int64_t samples() const override { return block_->samples(); }
  ClassAccuracy accuracy() override { return block_->accuracy_before(); }
  bool cached() const override { return false; }
  Answer<ModeStatistics> statistics(int64_t mode, double threshold) override {
    check_mode(mode);
    return timed([&] { return block_->statistics(threshold); });
  }
  Answer<Gallery> gallery(const GalleryRequest& request) override {
    return timed([&] { return block_->gallery(request); });
  }
  Answer<AblationOutcome> ablate(int64_t mode, const std::vector<int64_t>& experts, AblationMethod method,
                                 const std::function<bool()>& cancelled) override {
    check_mode(mode);
    return timed([&] { return block_->ablate(experts, method, cancelled); });
  }
  const RunData& run() override { return block_->image_run(); }
  SampleImage image(int64_t sample, int64_t patch) override { return block_->image(sample, patch); }
  Answer<SweepOutcome> sweep(int64_t mode, AblationMethod method, const SweepCallback& progress, bool recompute) override {
    check_mode(mode);
    return cached_answer(*cache_, run_id_, "sweep", sweep_answer_key(mode, method), recompute,
                         [](const nlohmann::json& j) { return sweep_outcome_from_json(j); },
                         [&] { return block_->sweep(method, progress); });
  }
  bool sweep_is_cheap(int64_t mode) override {
    return block_->class_tokens_only() ||
           cache_->get_result(run_id_, "sweep", sweep_answer_key(mode, AblationMethod::Sparse)).has_value();
  }
  Answer<SweepOutcome> sweep_shard(int64_t mode, AblationMethod method, int64_t k, int64_t n,
                                   const SweepCallback& progress) override {
    check_mode(mode);
    const auto range = shard_experts(block_->experts(), k, n);
    auto answer = timed([&] { return block_->sweep(method, progress, range); });
    put_sweep_part(*cache_, run_id_, "sweep", sweep_answer_key(mode, method), k, n, block_->experts(),
                   to_json(answer.value));
    return answer;
  }
  void write_gallery_sheet(const std::string& path, const Gallery& gallery, const SweepCallback& progress) override {
    draw_sheet(path, *block_, gallery, progress);
  }
  VitBlockAnalysis* block() override { return block_.get(); }
  model::ModelLayer manifest_layer() const override { return block_->manifest_layer(); }
  int64_t rows_per_sample() const override { return block_->coefficient_rows(); }
  RowCoverage row_coverage() override {
    const int64_t rows = block_->coefficient_rows(), experts = block_->experts();
    RowCoverage c;
    c.rows_per_expert.assign(static_cast<size_t>(experts), 0);
    for (int64_t s = 0; s < block_->samples(); ++s) {
      const auto a = block_->token_coefficients(s);
      for (int64_t t = 0; t < rows; ++t) {
        bool taken = false;
        for (int64_t e = 0; e < experts; ++e)
          if (a[static_cast<size_t>(t * experts + e)] > 0) {
            taken = true;
            ++c.rows_per_expert[static_cast<size_t>(e)];
          }
        c.rows_without_expert += !taken;
      }
    }
    return c;
  }
  double microseconds_per_row() override {
    return random_tokens_microseconds_per_row(block_->manifest_layer(), block_->coefficient_rows());
  }
  SampleRows sample_rows() const override {
    return {block_->grid(), block_->rows_are_patches(), block_->class_tokens_only()};
  }
  int64_t strongest_row(int64_t sample, int64_t expert) const override { return block_->strongest_row(sample, expert); }
  int64_t samples_available() const override { return block_->images_available(); }
  bool has_images() const override { return true; }
  std::string cache_path() const override { return cache_->path(); }
  std::string cache_note() const override { return cache_note_; }

 private:
  void check_mode(int64_t mode) const {
    if (mode != 0) throw UsageError(block_->layer_name() + " has one expert mode (0), not " + std::to_string(mode));
  }
  std::unique_ptr<VitBlockAnalysis> block_;
  std::unique_ptr<cache::AnalysisCache> cache_;
  int64_t run_id_ = 0;
  std::string cache_note_;
};

}  // namespace

std::unique_ptr<LayerAnalysis> LayerAnalysis::open(const SessionOptions& options, const LayerAnalysisOptions& layer,
                                                   const ExtractionCallback& progress, const OpenSteps& steps,
                                                   ExtractionSummary* summary) {
  if (names_vit_block(options)) {
    // Checked before the baseline pass, which takes a while.
    if (!options.gallery_images.empty()) throw UsageError("--images is for feature data, not a backbone layer");
    cache::CacheOpenReport opened;
    auto cache = cache::AnalysisCache::open(options.cache_path.empty() ? cache::default_cache_path() : options.cache_path,
                                            &opened);
    if (steps.cache_opened) steps.cache_opened(opened);
    VitBlockOptions block;
    block.limit = layer.max_images;
    block.fit_in_memory = layer.fit_in_memory;
    const auto start = std::chrono::steady_clock::now();
    auto analysis = VitBlockAnalysis::open(options, block, [&](int64_t done, int64_t total) {
      if (!progress) return true;
      ExtractionProgress p;
      p.samples_done = done;
      p.samples_total = total;
      p.elapsed_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      p.eta_seconds = done > 0 ? p.elapsed_seconds / static_cast<double>(done) * static_cast<double>(total - done) : -1;
      return progress(p);
    });
    const auto run_id = cache->begin_run(analysis->run_key(options.model_path), analysis->run_info());
    if (steps.recompute) {
      // The block's run holds answers only: --recompute drops them all.
      cache::CacheCheckReport dropped;
      dropped.runs = 1;
      dropped.results = static_cast<int64_t>(cache->result_keys(run_id).size());
      dropped.repaired = true;
      cache->clear_results(run_id);
      if (steps.recomputed) steps.recomputed(dropped);
    }
    return std::make_unique<BackboneLayerAnalysis>(std::move(analysis), std::move(cache), run_id,
                                                   cache::opening_note(opened));
  }
  if (layer.max_images != 0)
    throw UsageError("--max-images is for a μMoE layer inside a ViT or MLP-Mixer (--layer blocks.L.mlp, mixer_blocks.…)");
  return std::make_unique<HeadAnalysis>(AnalysisSession::open_extracted(options, progress, summary, steps));
}

}  // namespace mumoe::analysis
