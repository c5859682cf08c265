// The analysis API for μMoE GPTs that the CLI and (later) the GUI's token view share: one
// model, one text data set (its validation split, cut into sequences), one MLP block, one
// cache — the language-model counterpart of AnalysisSession (analysis_session.h).
//
// What is cached (cache/analysis_cache.h, keyed by the model file's content hash, the evaluation
// set's identity + token hash, the layer and the parameters):
//   * the per-token extraction of the layer (token_extraction.h): chunks with resume;
//   * every answer: token galleries (kind "token-gallery") and ablation reports ("lm-ablation",
//     "lm-sweep"), baseline included, so asking again needs no forward pass at all.
// Not cached: the ablation engine's float64 state (h_L, x_{L+1} per token). The cache keeps
// inputs as float32 and re-running from rounded inputs would not be the model the naive oracle
// runs; so the first ablation in a session makes one float64 baseline pass (≈ one naive pass)
// and keeps it in memory for the next ones.
//
// Torch-free header (pimpl). Not thread-safe: one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "analysis/analysis_session.h"
#include "analysis/lm_ablation_results.h"
#include "analysis/lm_eval_set.h"
#include "analysis/lm_steering.h"
#include "analysis/token_gallery.h"

namespace mumoe::analysis {

struct TextSessionOptions {
  std::string model_path;
  std::string data_spec = "fortunes";  ///< a text SPEC; its validation split is analysed
  std::string layer;                   ///< "transformer.h.2.mlp.MuMoE_layer" or "2"; required when n_layer > 1
  std::string cache_path;              ///< "" = cache::default_cache_path()
  std::string device = "cpu";
  int64_t max_sequences = kDefaultLmSequences;  ///< 0 = the whole validation split
  int64_t sequences_per_chunk = 16;
  /// When extraction's chunks are committed and reported (progress.h): for tests.
  ChunkBatching chunk_batching;
  /// The split, as the model was trained (read from the manifest's provenance when < 0 / unset).
  double validation_fraction = -1;
  int64_t n_head = 0;  ///< for plain state dicts (see model::load_gpt)
  /// byte, gpt2 or a directory (text/tokenizer_choice.h); "" = the model's own
  /// (model::gpt_tokenizer_name: its manifest, else its vocabulary size).
  std::string tokenizer;
};

/// True when `model_path` holds a μMoE GPT (a mumoe-gpt file or a plain nanoGPT-μMoE state
/// dict): the commands then take the text path. Throws FileError for an unreadable file.
bool is_gpt_model_file(const std::string& model_path);

class TextAnalysisSession : public CachedSession {
 public:
  /// Loads the model and the evaluation set and opens the cache. Throws FileError / UsageError.
  static std::unique_ptr<TextAnalysisSession> open(const TextSessionOptions& options);
  /// Opens and extracts in one call, as AnalysisSession::open_extracted does (open_then_extract).
  static std::unique_ptr<TextAnalysisSession> open_extracted(const TextSessionOptions& options,
                                                             const ExtractionCallback& progress = {},
                                                             ExtractionSummary* summary = nullptr,
                                                             const OpenSteps& steps = {});
  ~TextAnalysisSession();

  const TextSessionOptions& options() const;
  const std::string& layer_name() const;  ///< "transformer.h.2.mlp.MuMoE_layer"
  int64_t layer_index() const;
  int64_t expert_count() const;
  const LmEvalSet& eval_set() const;

  /// Per-token extraction of the layer into the cache (nothing when extracted()). Cancel → Cancelled.
  ExtractionSummary extract(const ExtractionCallback& progress = {});
  /// The repair behind --recompute: drops this run's stored answers and its damaged chunks, so
  /// that the next extract() recomputes exactly those; sound chunks are kept.
  cache::CacheCheckReport recompute();
  /// The complete per-token run. Throws UsageError before extraction.
  const RunData& run();
  /// Each expert's load, support and mean coefficient over the evaluation tokens, with the next
  /// byte as the class (expert_statistics.h). Throws UsageError before extraction.
  ModeStatistics statistics(double threshold = 0.5);

  Answer<TokenGallery> gallery(const GalleryRequest& request, int64_t context_radius = 24);
  /// `progress` reports the baseline pass (sequences) when it has to run.
  Answer<LmAblationReport> ablate(const std::vector<int64_t>& experts, AblationMethod method = AblationMethod::Sparse,
                                  bool recompute = false, const SweepCallback& progress = {});
  /// `progress` reports experts done (after the baseline pass, if it runs).
  Answer<LmAblationReport> sweep(AblationMethod method = AblationMethod::Sparse, const SweepCallback& progress = {},
                                 bool recompute = false);
  /// Shard k of n of that sweep (its experts: sweep_shards.h, shard_experts), baseline included,
  /// computed and stored in the cache as the shard's part for `mumoe cache merge`, which joins the
  /// parts into the "lm-sweep" answer sweep() reads.
  Answer<LmAblationReport> sweep_shard(AblationMethod method, int64_t k, int64_t n, const SweepCallback& progress = {});

  /// The cluster centre of `expert` (lm_steering.h) from the cached per-token run. Throws
  /// UsageError before extraction or when no token reaches the threshold.
  SteeringVector steering_vector(int64_t expert, const CentreOptions& options = {});
  /// Unsteered and steered generations for one request (lm_steering.h); needs the extraction
  /// (for the centre). Not cached: generation is cheap and the texts depend on every option.
  /// `progress` gets (tokens done, 2 × request.tokens) after each token; false cancels (throws
  /// Cancelled).
  SteeringResult steer(const SteeringRequest& request, const std::function<bool(int64_t, int64_t)>& progress = {});

 private:
  struct Impl;
  explicit TextAnalysisSession(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mumoe::analysis
