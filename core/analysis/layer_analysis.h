// One entry point for the expert analysis of an image classifier's layer, whatever the layer's
// place: the head or a bare layer (AnalysisSession: coefficients extracted into the SQLite cache,
// answers kept there), or a μMoE/router layer inside a ViT or MLP-Mixer backbone
// (VitBlockAnalysis: one float64 baseline pass keeping the stream the layer reads, recomputed at
// each open; its sweeps, the slow answers, kept in the cache under the block's own run). Callers — the CLI's stats, gallery and ablate, `compare` — ask the same questions
// without choosing between the two; a new kind of layer is one more implementation here.
//
// Language models answer other questions (token galleries, next-token loss) and keep their own
// entry point (TextAnalysisSession); is_gpt_model_file tells them apart.
//
// This header is torch-free, so the CLI commands that use it compile without LibTorch.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "analysis/analysis_session.h"
#include "analysis/answer.h"
#include "analysis/progress.h"
#include "analysis/vit_block_analysis.h"
#include "model/manifest.h"

namespace mumoe::analysis {

struct LayerAnalysisOptions {
  /// A backbone layer: analyse the first N images (0 = all).
  int64_t max_images = 0;
  /// A backbone layer: when the kept streams of every image would not fit in memory, analyse the
  /// first images that do instead of refusing (the GUI's choice).
  bool fit_in_memory = false;
};

class LayerAnalysis {
 public:
  /// Opens options.model_path on options.data_spec for options.layer ("" = the model's own
  /// choice: a classifier's head, or a Linear-head Mixer's last μMoE layer), extracting what the
  /// cache lacks (a head) or running the baseline pass (a backbone layer); `progress` reports
  /// samples done and may cancel (Cancelled); `steps` are the cache's.
  /// `summary` (may be null) tells a head's extraction (chunks computed, from the cache); a
  /// backbone layer leaves it as it was (nothing is extracted: chunks_computed stays 0). A
  /// backbone layer opens the cache too (its sweeps are kept there) and `steps` apply to it.
  static std::unique_ptr<LayerAnalysis> open(const SessionOptions& options, const LayerAnalysisOptions& layer = {},
                                             const ExtractionCallback& progress = {}, const OpenSteps& steps = {},
                                             ExtractionSummary* summary = nullptr);
  virtual ~LayerAnalysis() = default;

  virtual std::string layer_name() const = 0;
  /// The model's label names, else the data's, else class indices.
  virtual const std::vector<std::string>& class_names() const = 0;
  virtual std::vector<int64_t> expert_dims() const = 0;
  /// A multi-label model's head: class_names() are its outputs, accuracy and ablation are per
  /// output, and galleries' labels are output bitmasks (RunData::multilabel, label_text).
  virtual bool multilabel() const { return false; }
  /// The data's binary attributes, which a gallery's subpopulation filter names (a head's; a
  /// backbone layer's galleries are not filtered).
  virtual const std::vector<std::string>& attribute_names() const {
    static const std::vector<std::string> none;
    return none;
  }
  /// The samples analysed (images of a backbone layer: maybe fewer than the data's).
  virtual int64_t samples() const = 0;
  virtual ClassAccuracy accuracy() = 0;
  /// True when every answer is kept in the analysis cache (a head or bare layer); a backbone
  /// layer keeps only its sweeps there, and its baseline pass runs at each open.
  virtual bool cached() const = 0;

  virtual Answer<ModeStatistics> statistics(int64_t mode, double threshold) = 0;
  virtual Answer<Gallery> gallery(const GalleryRequest& request) = 0;
  /// `cancelled` is polled between batches where the work is long (a backbone layer's re-runs).
  virtual Answer<AblationOutcome> ablate(int64_t mode, const std::vector<int64_t>& experts, AblationMethod method,
                                         const std::function<bool()>& cancelled = {}) = 0;
  /// Every expert of `mode` removed in turn; `progress` (experts done, total) may cancel. Kept in
  /// the cache (a backbone layer's too); `recompute` computes it again.
  virtual Answer<SweepOutcome> sweep(int64_t mode, AblationMethod method, const SweepCallback& progress = {},
                                     bool recompute = false) = 0;
  /// True when sweep(mode, Sparse) answers at once or in about a second — a head's; a backbone
  /// layer's when it is stored (asked before, or merged from sweep shards) or when only class
  /// tokens reach the output (the last block of a class-token ViT) — so that a front end may show
  /// it unasked; false when it re-runs images through the blocks after the layer (minutes).
  virtual bool sweep_is_cheap(int64_t mode) = 0;
  /// Shard k of n of that sweep (its experts: sweep_shards.h, shard_experts), computed and stored
  /// in the cache as the shard's part for `mumoe cache merge`. A backbone layer only (UsageError
  /// for a head, whose sweep takes seconds once extracted: its extraction is what is sharded).
  virtual Answer<SweepOutcome> sweep_shard(int64_t mode, AblationMethod method, int64_t k, int64_t n,
                                           const SweepCallback& progress = {}) = 0;

  /// Writes `gallery` as a PNG contact sheet (label and coefficient on each tile; a backbone
  /// layer's tiles outline their patch), atomically. Throws UsageError when this build has no
  /// OpenCV or the samples have no images (a feature file without gallery images).
  /// `progress` (tiles drawn, total) may cancel.
  virtual void write_gallery_sheet(const std::string& path, const Gallery& gallery,
                                   const SweepCallback& progress = {}) = 0;
  /// The samples as statistics and galleries see them (a backbone layer's images by their
  /// strongest row: one expert mode): what a sample's coefficient vector is read from.
  virtual const RunData& run() = 0;
  /// Sample `sample` as 8-bit pixels; a backbone layer's with patch `patch` outlined (-1: none).
  /// Empty (a head) when the data has no images.
  virtual SampleImage image(int64_t sample, int64_t patch = -1) = 0;

  /// How a sample relates to the image it comes from, for front ends that show it: a head's sample
  /// is one coefficient vector (patch_grid 0); a backbone layer's is an image counted by its
  /// strongest row for an expert — a patch of a patch_grid × patch_grid grid, or (a Mixer's token
  /// mixing) a channel.
  struct SampleRows {
    int64_t patch_grid = 0;        ///< 0: not an image of rows
    bool rows_are_patches = true;  ///< false: rows are channels (no place in the image)
    bool class_tokens_only = false;  ///< only class tokens reach the output (affected counts are images)
  };
  virtual SampleRows sample_rows() const { return {}; }
  /// The row (patch or channel) of `sample` with the largest coefficient for `expert`; -1 for a
  /// head.
  virtual int64_t strongest_row(int64_t /*sample*/, int64_t /*expert*/) const { return -1; }
  /// The data's samples, of which samples() were analysed (a backbone layer keeps the first images
  /// that fit in memory).
  virtual int64_t samples_available() const { return samples(); }
  /// Whether image(sample) has pixels (a feature file without gallery images has none).
  virtual bool has_images() const = 0;
  /// The layer's configuration as loaded (family, experts, parameters, input width): a backbone
  /// layer's is rebuilt from its module, so its key prefix is only its name's.
  virtual model::ModelLayer manifest_layer() const = 0;
  /// The layer's coefficient rows per sample (one coefficient vector each): a head's sample is
  /// one row; a backbone layer's image is its tokens (or a Mixer token mixing's channels).
  virtual int64_t rows_per_sample() const { return 1; }
  /// Over every row of every sample: how many rows each expert of mode 0 takes (coefficient
  /// > 0; 0 = a dead expert), and how many rows no expert takes (a capacity-limited router's
  /// dropped tokens).
  struct RowCoverage {
    std::vector<int64_t> rows_per_expert;
    int64_t rows_without_expert = 0;
  };
  virtual RowCoverage row_coverage() = 0;
  /// The layer alone, timed: the best of three float32 forward passes, in microseconds per row
  /// (layer_timing.h: a head on its stored inputs, a backbone layer on random tokens).
  virtual double microseconds_per_row() = 0;

  /// The analysis cache file, and what opening it did (cache::opening_note; "" when nothing
  /// happened worth saying).
  virtual std::string cache_path() const = 0;
  virtual std::string cache_note() const { return {}; }

  /// What only one kind has (benchmarks and tests reach in; front ends use the calls above).
  virtual VitBlockAnalysis* block() { return nullptr; }
  virtual AnalysisSession* session() { return nullptr; }
};

}  // namespace mumoe::analysis
