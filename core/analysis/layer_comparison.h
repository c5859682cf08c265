// One model's row of a comparison across expert layers — the Compare page's table and chart
// and `mumoe compare` (issue 18: μMoE beside the router study's sparse and soft MoE layers, on
// the same data). Every figure comes from the same analysis session every other view uses:
// the stored run (extraction), the cached full ablation sweep of the first expert mode, and
// the mode's statistics.
//
// What the figures mean, for every kind of layer alike:
//   * accuracy: of the unablated layer on the data.
//   * mean polysemanticity: Eq. 4 averaged over the experts whose removal changed a class
//     accuracy (the sweep), and how many those are.
//   * class purity: each sample is counted for its strongest expert (largest coefficient); an
//     expert's purity is the share of its samples in their most frequent class, averaged over
//     the experts that are some sample's strongest.
//   * I(E;Y)/H(Y): the share of the class entropy that the strongest expert explains, over the
//     samples some expert took (0 = experts ignore the class, 1 = the expert tells the class).
//   * load CV: the coefficient of variation (std/mean over all experts) of how many samples each
//     expert is strongest for (0 = perfectly balanced). Dead experts: coefficient 0 on every
//     sample.
//   * dropped tokens: tokens no expert took (capacity-limited routers; 0 for μMoE and Soft MoE);
//     a head's token is a sample.
//   * cost per token: multiply-adds of the layer's forward pass counted from its configuration
//     (layer_multiply_adds), and the measured time of a float32 forward pass.
//
// Every kind of layer is compared through the one entry point, LayerAnalysis (layer_analysis.h),
// without asking which kind it is. For a layer inside a ViT or Mixer (options.layer
// "blocks.{L}.mlp", …) the samples are images, each counted for an expert by its strongest patch
// (as its statistics and galleries do), accuracy and ablation at the classifier's output; its
// tokens are every image's rows (patch and class tokens, or a token mixing's channels), and its
// cost is timed on standard-normal tokens of the layer's shape. Its sweep is read from the cache
// when stored (merged sweep shards too); the baseline pass runs each time.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>

#include "analysis/analysis_session.h"
#include "model/manifest.h"

namespace mumoe::analysis {

struct LayerComparison {
  std::string model_path;
  std::string data_spec;
  std::string layer;
  std::string family;  ///< "μMoE CP", "Soft MoE", … (ModelLayer::family)
  std::string gate;    ///< μMoE: its gate activation ("entmax15", "softmax"); routers: the router's name
  int64_t experts = 0;  ///< of the first expert mode
  int64_t parameters = 0;
  int64_t samples = 0;
  int64_t tokens = 0;  ///< samples × tokens per sample (1 for a head)
  double accuracy = 0;
  double mean_polysemanticity = 0;  ///< NaN when no removal changed a class accuracy
  int64_t experts_with_effect = 0;
  double mean_class_purity = 0;     ///< NaN when no sample was routed
  double information_ratio = 0;     ///< I(E;Y)/H(Y); NaN when H(Y) = 0
  double load_cv = 0;
  int64_t dead_experts = 0;
  int64_t dropped_tokens = 0;
  double multiply_adds_per_sample = 0;  ///< per token (a head's token is its sample)
  double microseconds_per_sample = 0;   ///< per token, measured (float32 forward of the layer alone)
  bool from_cache = false;  ///< extraction and sweep were both read from the cache (a backbone layer: its sweep)
  double seconds = 0;       ///< this call
};

/// Called with the step ("Reading samples": the extraction or a backbone's baseline pass; "Sweep"), its progress and an ETA (0 = unknown);
/// return false to cancel (Cancelled is thrown; what was stored stays valid).
using ComparisonCallback = std::function<bool(const std::string& step, int64_t done, int64_t total, double eta_seconds)>;

/// Opens the model on the data (options), extracts and sweeps what the cache lacks, and fills
/// the row. Throws what LayerAnalysis::open throws (FileError/UsageError naming the file).
LayerComparison compare_layer(const SessionOptions& options, const ComparisonCallback& progress = {});

/// Multiply-adds per sample of a layer's forward pass, counted from its configuration:
///   μMoE CP:  gating I·ΣN_e + the factorised forward R·(ΣN_e + I(+1) + O), per layer of a block;
///   μMoE TR:  gating + Σ_k R_k·dim_k·R_{k+1} (each core against its vector) + R_1·R_k·R_{k+1}
///             per chained core;
///   routers:  the affinity I·n (Soft MoE: I·n·p) + the experts on their slots: token choice
///             c·k expert evaluations per token, expert choice c, Soft MoE n·p / T (the slots of
///             an input of T tokens) plus mixing n·p·(I + O).
/// `tokens_per_input`: tokens Soft MoE mixes into its slots (a head: 1; a ViT block: its tokens).
double layer_multiply_adds(const model::ModelLayer& layer, int64_t tokens_per_input = 1);

nlohmann::json to_json(const LayerComparison& row);
LayerComparison layer_comparison_from_json(const nlohmann::json& json);

}  // namespace mumoe::analysis
