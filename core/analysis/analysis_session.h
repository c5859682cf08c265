// The analysis API that the CLI and the GUI share: one model, one data set, one μMoE layer, one
// cache. Opening is cheap (the model and data are loaded and hashed); extraction fills the cache
// once; every view after that — statistics, galleries, ablations, sweeps — is answered from the
// cache when it was asked before, and computed from the cached run otherwise (then stored).
//
// A multi-label model (one binary output per data attribute, e.g. the bias demo) is analysed per
// output: its outputs stand where classes stand (class_names, per-output accuracy, ablation's
// drop per output), its run's labels and predictions are output bitmasks (RunData::multilabel),
// and galleries may be restricted to a subpopulation of the data's attributes.
//
// Torch-free header (pimpl), so UI code can hold a session. Not thread-safe: one thread at a
// time (the GUI runs jobs on a worker thread and hands results back).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "analysis/ablation_results.h"
#include "analysis/answer.h"
#include "analysis/expert_statistics.h"
#include "analysis/gallery.h"
#include "analysis/progress.h"
#include "analysis/run_data.h"
#include "analysis/session_run.h"
#include "cache/analysis_cache.h"
#include "cache/cache_repair.h"
#include "model/state_dict_layout.h"

namespace mumoe::model {
class ClassifierModel;
}

namespace mumoe::analysis {

struct SessionOptions {
  std::string model_path;
  std::string data_spec = "fashion-mnist:test";
  std::string layer;       ///< "" = the model's only μMoE layer ("head" for image classifiers)
  std::string cache_path;  ///< "" = cache::default_cache_path()
  std::string device = "cpu";
  int64_t chunk_size = 500;
  /// Where extraction runs a head's float64 expert arithmetic (progress.h; the same bits either
  /// way): for benchmarks.
  ExtractionArithmetic extraction_arithmetic = ExtractionArithmetic::Auto;
  /// When extraction's chunks are committed and reported (progress.h): for tests.
  ChunkBatching chunk_batching;
  model::LayoutOverrides overrides;  ///< what a plain PyTorch state_dict cannot tell
  /// Images for galleries when data_spec is a feature file made from them (same samples in the
  /// same order, e.g. `mumoe features … --data fashion-mnist:test`); "" = none.
  std::string gallery_images;
};

/// An answer and where it came from.

/// One 8-bit image for galleries: rows × cols × channels (1 or 3), row-major.
struct SampleImage {
  int64_t height = 0, width = 0, channels = 0;
  std::vector<uint8_t> pixels;
  bool empty() const { return pixels.empty(); }
};

/// What open_extracted does and tells between opening and extracting: a front end reports the
/// cache's state before a long extraction starts (the CLI's warnings), and --recompute repairs
/// before anything is read.
struct OpenSteps {
  /// Drop this run's stored answers and damaged chunks before extracting (recompute()).
  bool recompute = false;
  /// Called once the cache is open, before any work (cache::opening_note says it in words).
  std::function<void(const cache::CacheOpenReport&)> cache_opened;
  /// Called with what recompute() dropped and repaired (only when `recompute`).
  std::function<void(const cache::CacheCheckReport&)> recomputed;
};

/// open_extracted for either session type: open, report the cache, repair, extract.
template <typename Session, typename Options>
std::unique_ptr<Session> open_then_extract(const Options& options, const ExtractionCallback& progress,
                                           ExtractionSummary* summary, const OpenSteps& steps) {
  auto session = Session::open(options);
  if (steps.cache_opened) steps.cache_opened(session->cache_report());
  if (steps.recompute) {
    const auto repaired = session->recompute();
    if (steps.recomputed) steps.recomputed(repaired);
  }
  const auto done = session->extract(progress);
  if (summary) *summary = done;
  return session;
}

class AnalysisSession : public CachedSession {
 public:
  /// Loads and checks the model and data and opens the cache. Throws FileError / UsageError.
  static std::unique_ptr<AnalysisSession> open(const SessionOptions& options);
  /// Opens and extracts in one call — what every front end does before it shows anything:
  /// open(), then extract() with `progress` (false cancels: Cancelled; what was stored stays
  /// valid) and its summary in `summary` (chunks_computed = 0: all from the cache). What the
  /// cache file did on opening is cache_report() (cache::opening_note), also told to
  /// `steps.cache_opened` before the extraction; `steps.recompute` repairs first.
  static std::unique_ptr<AnalysisSession> open_extracted(const SessionOptions& options,
                                                         const ExtractionCallback& progress = {},
                                                         ExtractionSummary* summary = nullptr,
                                                         const OpenSteps& steps = {});
  ~AnalysisSession();

  const SessionOptions& options() const;
  const std::string& layer_name() const;
  const std::vector<std::string>& class_names() const;
  const std::vector<std::string>& attribute_names() const;
  /// True for a multi-label model (see above).
  bool multilabel() const;
  std::vector<int64_t> expert_dims() const;
  /// "μMoE CP", "μMoE TR", "Soft MoE", "Softmax Token Choice", … (the analysed layer's kind).
  std::string layer_family() const;
  /// The opened model (its layer's configuration, for reports).
  const model::ClassifierModel& model() const;
  int64_t sample_count() const;
  bool has_images() const;

  /// Computes what the cache lacks (nothing when extracted()). Cancel → Cancelled.
  ExtractionSummary extract(const ExtractionCallback& progress = {});
  /// The complete run (loaded from the cache once). Throws UsageError before extraction, and
  /// FileError naming the cache and the remedy when a chunk is damaged (unreadable, missing, or
  /// with labels or predictions outside the model's classes).
  const RunData& run();
  /// The repair behind --recompute: drops this run's stored answers and its damaged chunks
  /// (those run() would refuse), so that the next extract() recomputes exactly those chunks and
  /// every question is answered afresh; sound chunks are kept. Nothing when there is no run yet.
  cache::CacheCheckReport recompute();

  /// Accuracy of the unablated model per class.
  ClassAccuracy accuracy();
  Answer<ModeStatistics> statistics(int64_t mode = 0, double threshold = 0.5);
  Answer<Gallery> gallery(const GalleryRequest& request);
  /// `recompute` ignores a stored answer (benchmarks, the naive oracle) and stores the new one.
  Answer<AblationOutcome> ablate(int64_t mode, const std::vector<int64_t>& experts,
                                 AblationMethod method = AblationMethod::Sparse, bool recompute = false);
  Answer<SweepOutcome> sweep(int64_t mode = 0, AblationMethod method = AblationMethod::Sparse,
                             const SweepCallback& progress = {}, bool recompute = false);

  /// Sample `sample` as 8-bit pixels, from the image data or from options().gallery_images;
  /// empty when neither has images. Throws UsageError when gallery_images does not match the
  /// data (sample count or labels differ).
  SampleImage sample_image(int64_t sample) const;
  /// True when sample_image can return pixels.
  bool has_gallery_images() const;

 private:
  struct Impl;
  explicit AnalysisSession(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mumoe::analysis
