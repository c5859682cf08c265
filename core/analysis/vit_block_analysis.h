// The μMoE MLP of one block inside a ViT image classifier (a timm-layout ViT whose blocks' MLPs
// are μMoE two-layer blocks, nn/backbone_config.h) — or one μMoE mixing MLP of an MLP-Mixer
// (nn/mlp_mixer.h; its "block" is a TokenBackbone step: 2i token mixing, 2i + 1 channel mixing of
// mixer block i; a token-mixing MLP's coefficients are per channel, not per patch, so its
// galleries outline no patch and an image counts by its strongest channel): its experts'
// coefficients per patch token, the
// patches that activate each expert most (the paper's Fig. 4 and 12 galleries of μMoE
// MLP-mixers), and counterfactual ablation of its experts measured at the classifier's output —
// per-class accuracy before and after, d^(n), polysemanticity (spec §4), as for the head.
//
// Two methods with the same predictions, image for image (the tests compare them exactly):
//   * Sparse: the constructor runs every image once (float64, on a copy of the model) and keeps
//     the stream block L's MLP reads (after block L's attention), its coefficients and the
//     predictions. Removing expert n leaves the gates alone, so block L's output changes only at
//     tokens with a_n > 0; attention in the blocks after L mixes tokens, so every image holding
//     such a token is re-run from block L's MLP to the logits, and no other image is touched.
//     When L is the last block and the ViT pools its class token, only that token reaches the
//     features: only images whose class token uses the expert are re-run, and only that token.
//     A router MLP (sparse or soft MoE) routes each image's tokens together, so there the image's
//     routing is recomputed and the removed experts' contributions to the class token subtracted
//     (routing does not depend on the experts' outputs; MoELayerImpl::contributions_at_token),
//     and sweep() removes every expert in turn from one routing pass per batch of images.
//   * Naive (the oracle): expert n's factor slices zeroed in both layers of block L (CP: row n of
//     factors.0; TR: slice [:, n, :]) on the copy, and every image through the model's own
//     forward — the paper's protocol, sharing none of the steps above.
// Predictions agree image for image up to floating-point near-ties: the sparse method re-runs
// its images in batches of another shape, which can change the last bits of a float64 sum (the
// tests compare both methods exactly, and with PyTorch).
// Statistics and galleries see each image through its strongest patch per expert (image_run()),
// so the head's expert_statistics and select_gallery serve the block unchanged; the CLI (stats,
// gallery, ablate --layer blocks.L.mlp) and the GUI's SessionController both call this class.
// Only the first expert mode is ablated (a hierarchical block's mode 0). The baseline pass runs
// when the object is made; run_key() is where a caller keeps its answers in the analysis cache
// (LayerAnalysis keeps sweeps there, and merged sweep shards land there: sweep_shards.h).
//
// This header is torch-free (pimpl), so the CLI commands that use it compile without LibTorch.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "analysis/ablation_results.h"
#include "analysis/analysis_session.h"
#include "analysis/expert_statistics.h"
#include "analysis/gallery.h"
#include "analysis/run_data.h"
#include "cache/analysis_cache.h"
#include "model/manifest.h"

namespace mumoe::data {
struct Dataset;
}

namespace mumoe::analysis {

/// True when `options.layer` names a μMoE layer in the backbone of the image classifier
/// options.model_path ("blocks.{i}.mlp", "mixer_blocks.{i}.0.fn.1", "mixer_blocks.{i}.1.fn" in its
/// manifest), or names none and the classifier's head is a plain Linear layer (an MLP-Mixer: its
/// last μMoE layer is analysed): the commands then analyse it with VitBlockAnalysis instead of an
/// AnalysisSession. Reads the model file's header (throws what ModelFile::load throws) unless the
/// name is of another form.
bool names_vit_block(const SessionOptions& options);

struct VitBlockOptions {
  int64_t limit = 0;           ///< the first `limit` samples of the data (0 = all)
  std::string device = "cpu";
  int64_t batch_size = 256;    ///< images per forward pass
  /// When the kept streams of `limit` (or all) images would not fit in memory: analyse the first
  /// images that do (images_available() tells how many there were) instead of refusing.
  bool fit_in_memory = false;
};

class VitBlockAnalysis {
 public:
  /// Copies `model`'s classifier (float64 on options.device) and runs the baseline pass.
  /// `progress` (samples done, total) may cancel (Cancelled). Throws UsageError when the model
  /// is not a ViT, block `block`'s MLP is not a μMoE block, or the kept streams would not fit.
  VitBlockAnalysis(const model::ClassifierModel& model, const data::Dataset& data, int64_t block,
                   const VitBlockOptions& options = {}, const SweepCallback& progress = {});
  ~VitBlockAnalysis();
  VitBlockAnalysis(const VitBlockAnalysis&) = delete;
  VitBlockAnalysis& operator=(const VitBlockAnalysis&) = delete;
  /// Opens options.model_path (with options.overrides) and options.data_spec as an
  /// AnalysisSession would, for the backbone layer options.layer names (names_vit_block; "" = a
  /// Linear-head classifier's last μMoE layer), on options.device (block.device is ignored).
  static std::unique_ptr<VitBlockAnalysis> open(const SessionOptions& options, VitBlockOptions block = {},
                                                const SweepCallback& progress = {});
  /// True when L is the last block and the ViT pools its class token: then only class tokens
  /// can change the predictions (affected_samples counts those images only).
  bool class_tokens_only() const;

  int64_t block() const;
  /// "blocks.{L}.mlp", or the Mixer's "mixer_blocks.{i}.0.fn.1" / "mixer_blocks.{i}.1.fn".
  std::string layer_name() const;
  /// True when the layer's coefficient rows are the stream's tokens (prefix tokens, then
  /// patches); false for a Mixer's token-mixing MLP, whose rows are the image's channels.
  bool rows_are_patches() const;
  /// Rows per image in token_coefficients: tokens, or channels (rows_are_patches() false).
  int64_t coefficient_rows() const;
  /// The layer's configuration as loaded, from its module (family, experts, parameters); the
  /// key prefix is the layer's name + ".".
  model::ModelLayer manifest_layer() const;
  /// The row (patch token after the prefix tokens, or channel) where image `sample` holds its
  /// largest coefficient for `expert`: what image_run() counts it by.
  int64_t strongest_row(int64_t sample, int64_t expert) const;
  /// The model's label names, else the data's, else class indices.
  const std::vector<std::string>& class_names() const;
  int64_t samples() const;
  /// The data's images: more than samples() when a limit or fit_in_memory left some out.
  int64_t images_available() const;
  int64_t experts() const;
  /// Patch tokens per image, and where they start in the token axis (1 after a class token).
  int64_t patches() const;
  int64_t prefix_tokens() const;
  /// The patch grid's side: patch p covers row p / grid, column p % grid of the backbone input.
  int64_t grid() const;
  const std::vector<int64_t>& labels() const;
  const std::vector<int64_t>& predictions_before() const;
  const ClassAccuracy& accuracy_before() const;
  /// Block L's mode-0 coefficients of sample `sample`'s rows, row-major [coefficient_rows(), N].
  std::vector<double> token_coefficients(int64_t sample) const;

  /// Every image's prediction with `experts` removed together.
  std::vector<int64_t> predictions_after(const std::vector<int64_t>& experts, AblationMethod method);
  /// Images whose prediction removing `experts` can change, ascending: those holding a token with
  /// a_n > 0 for some n in `experts` (only the class token counts after the last block when the
  /// ViT pools it).
  std::vector<int64_t> affected_samples(const std::vector<int64_t>& experts) const;
  /// One outcome: `experts` removed together. `cancelled` (may be empty) is polled between
  /// batches of re-run images; when it returns true, Cancelled is thrown.
  AblationOutcome ablate(const std::vector<int64_t>& experts, AblationMethod method,
                         const std::function<bool()>& cancelled = {});
  /// One outcome per expert of `experts` (default: all), each removed alone. `progress` (experts
  /// done, total in the range) may cancel; the router MLP's class-token sweep (above), which
  /// removes every expert per batch of images, reports the share of images done in experts' units
  /// and computes every expert whatever the range (one routing pass serves them all).
  SweepOutcome sweep(AblationMethod method, const SweepCallback& progress = {}, ExpertRange experts = {});

  /// The analysis cache's key of this analysis of the model file `model_path`: its content hash,
  /// the data's identity and content hash, the layer, the images analysed and the backbone's
  /// configuration — what the answers depend on. run_info() gives the run's shapes (S images,
  /// C classes, N experts; it stores no chunks).
  cache::RunKey run_key(const std::string& model_path) const;
  cache::RunInfo run_info() const;

  /// The images as galleries and statistics see them: image s's coefficient for expert n is
  /// its strongest patch token's, max over patches of a_n (class tokens are left out: they are
  /// no place in the image), as the one expert mode of a RunData with the labels and the
  /// predictions before ablation. An image counts towards an expert's load when one of its
  /// patches reaches the threshold. (dense_coefficients(image_run(), 0, s): one image's.)
  const RunData& image_run() const;
  /// Load, dead experts, top classes, I(E;Y), … of the experts over image_run().
  ModeStatistics statistics(double threshold = 0.5) const;
  /// select_gallery over image_run() (mode 0; random among images whose strongest patch reaches
  /// the threshold, or the top images), each item's `patch` its strongest patch for the expert.
  Gallery gallery(const GalleryRequest& request) const;
  /// What the ViT saw of image `sample` — after the eval transform's resize and crop, before
  /// normalisation — as 8-bit RGB, with patch `patch` (row-major in the patch grid) outlined in
  /// yellow unless it is -1: a gallery tile. Throws UsageError for a sample not analysed or a
  /// patch outside the grid.
  SampleImage image(int64_t sample, int64_t patch = -1) const;

 private:
  /// The same, with affected_samples(experts) already known (the sparse method needs it).
  std::vector<int64_t> predictions_after(const std::vector<int64_t>& experts, AblationMethod method,
                                         const std::vector<int64_t>& affected, const std::function<bool()>& cancelled);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mumoe::analysis
