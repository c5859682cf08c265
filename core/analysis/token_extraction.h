// Per-token extraction for a μMoE GPT (or one with router MLPs: coefficients are then the
// router's combine weights, nn/moe_layer.h): stream the evaluation sequences through the model and
// store, for MLP block L, every token as one sample of an ordinary analysis run — so the cache,
// RunData, statistics and select_gallery work on tokens unchanged:
//   label        the target token (the byte that follows)
//   prediction   the argmax next token
//   scores       one value per token: its cross-entropy (nats); RunInfo::output_dim is 1
//   inputs       h_L, block L's input (float32; for cluster centres / steering later)
//   coefficients block L's non-zero a_n
// The pass is float32, the model's own arithmetic (what PyTorch computes for it, at the same
// speed); ablation (lm_ablation.h) runs its own float64 baseline, so its sparse and naive methods
// agree token for token whatever the stored coefficients' last bits.
// Sample k is position k % T of sequence k / T (LmEvalSet). Chunks of whole sequences, stored
// whole (chunked_run.h): an interrupted extraction resumes at the first missing chunk.
#pragma once

#include <cstdint>
#include <string>

#include "analysis/lm_eval_set.h"
#include "analysis/progress.h"
#include "cache/analysis_cache.h"
#include "nn/mumoe_gpt.h"

namespace mumoe::analysis {

/// Bumped whenever token extraction changes the numbers it stores; part of every run key.
inline constexpr int kTokenExtractionVersion = 2;  // 2: float32 (1: float64)

struct TokenExtractionOptions {
  int64_t sequences_per_chunk = 16;  ///< 2,048 tokens of the demo GPT per chunk
  std::string device = "cpu";
  ChunkBatching batching;  ///< when chunks are committed and reported (progress.h)
};

/// The cache key: the model file's content hash, the evaluation set's identity and a hash of its
/// tokens, the layer name ("transformer.h.2.mlp.MuMoE_layer", or "transformer.h.2.mlp" in a GPT
/// of router MLPs), and the extraction parameters.
cache::RunKey make_token_run_key(const std::string& model_path, const nn::GptConfig& config, const LmEvalSet& set,
                                 int64_t layer,
                                 const TokenExtractionOptions& options);
cache::RunInfo make_token_run_info(const nn::MuMoEGpt& gpt, const LmEvalSet& set,
                                   const TokenExtractionOptions& options);

/// Computes every chunk the cache lacks (in float32: the model itself when it is in eval mode,
/// float32 and on the device, else a copy; lm_forward.h gpt_for_eval) and marks the run complete.
/// Progress counts tokens; returning false cancels (Cancelled; written chunks stay valid).
ExtractionSummary extract_token_run(cache::AnalysisCache& cache, const cache::RunKey& key, const nn::MuMoEGpt& gpt,
                                    const LmEvalSet& set, int64_t layer, const TokenExtractionOptions& options,
                                    const ExtractionCallback& progress = {});

}  // namespace mumoe::analysis
