// One complete analysis run held in memory: every chunk of the cache concatenated, plus an
// expert → samples index per expert mode. Plain C++ (no LibTorch): statistics, galleries and
// the GUI's item models work on it directly.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cache/analysis_cache.h"

namespace mumoe::analysis {

/// The non-zero coefficients of one expert mode by expert (CSC): expert n's samples are
/// samples/values[offsets[n] .. offsets[n+1]), in increasing sample order.
struct ExpertColumns {
  std::vector<int64_t> offsets;  ///< N + 1
  std::vector<int64_t> samples;
  std::vector<double> values;
  int64_t support(int64_t expert) const { return offsets[expert + 1] - offsets[expert]; }
};

struct RunData {
  cache::RunInfo info;
  /// A multi-label model's run (one binary output per attribute, AnalysisSession): then labels
  /// and predictions are output bitmasks — bit o of labels[s] is output o's truth (its attribute
  /// column), of predictions[s] whether its logit is > 0 — so that "correct" (label ==
  /// prediction), changed predictions and galleries read them as for a class index. At most 62
  /// outputs (kMaxMultilabelOutputs).
  bool multilabel = false;
  std::vector<int64_t> labels;       ///< [S] class index, or output bitmask when multilabel
  std::vector<int64_t> predictions;  ///< [S] class index, or output bitmask when multilabel
  std::vector<double> scores;        ///< [S × C]
  std::vector<float> inputs;         ///< [S × I] the μMoE layer's inputs
  std::vector<uint8_t> attributes;   ///< [S × K]
  std::vector<cache::SparseRows> coefficients;  ///< per mode, rows = samples
  /// [S × modes] Σ_n |a_e,n|: each sample's coefficient mass per mode, made by append() while a
  /// chunk's coefficients are at hand — the float32 score bounds need it (ExactLayer::
  /// float32_score_error), and reading a dense gate's 80 MB of coefficients again for it took
  /// 10 ms of a first ablation click (2026-11-27). Empty for runs built otherwise.
  std::vector<double> coefficient_mass;
  std::vector<ExpertColumns> columns;           ///< per mode, built by finish()

  int64_t samples() const { return static_cast<int64_t>(labels.size()); }
  int64_t modes() const { return static_cast<int64_t>(info.expert_dims.size()); }
  /// Reserves room for `chunks` chunks like `first` (chunks of a run hold about as many
  /// coefficients each): the vectors of a dense gate's run grow to 10⁷ entries, and growing them
  /// by doubling copied and first-touched each several times (2026-11-26).
  void reserve_like(const cache::ChunkRecord& first, int64_t chunks);
  /// Appends one chunk (chunks must come in sample order).
  void append(const cache::ChunkRecord& chunk);
  /// Builds `columns` once every chunk is appended.
  void finish();
};

/// Fills in, in place, what a chunk leaves to its data set and model: the inputs of a chunk that
/// stores none (ChunkRecord::inputs) and the coefficients of the modes it leaves to the model
/// (ChunkRecord::left_to_model, cleared once they are filled in). Throws FileError when it cannot
/// (the message names the chunk). analysis/extraction.h's load_extracted_run passes one for an
/// image classifier's run.
using ChunkCompletion = std::function<void(cache::ChunkRecord& chunk)>;

/// Every chunk of a complete run, in order. Throws UsageError if the run is not complete and
/// FileError naming the cache, the damaged chunk and the remedy (cache_repair.h) if a chunk is
/// unreadable or missing. `complete` is called on every chunk that stores no inputs or leaves
/// modes to the model; without it (or if it leaves them so) such a chunk is a FileError.
RunData load_run_data(const cache::AnalysisCache& cache, int64_t run_id, const ChunkCompletion& complete = {});

/// "" when every label and prediction is a class index in [0, class_count), else the first
/// offender ("sample 1234: label 7 outside the model's 4 classes"; samples numbered from
/// `first_sample`). Labels index per-class tables, so cached rows that fail this must never
/// reach them.
std::string class_index_problem(const std::vector<int64_t>& labels, const std::vector<int64_t>& predictions,
                                int64_t class_count, int64_t first_sample = 0);

/// Sample `sample`'s coefficients of expert mode `mode`, dense (one per expert, 0 where the
/// sparse rows hold none). Throws UsageError for a mode or sample the run lacks.
std::vector<double> dense_coefficients(const RunData& run, int64_t mode, int64_t sample);

/// Σ_n |a_e,n| of every sample (rows) and mode (columns): [samples × modes], from CSR rows by
/// mode (what RunData::coefficient_mass holds). A row that `modes` lack — only a malformed record
/// — gets an infinite mass: a bound that decides nothing, never one too small.
std::vector<double> coefficient_masses(const std::vector<cache::SparseRows>& modes, int64_t samples);

/// The most outputs a multi-label run's bitmasks hold.
constexpr int64_t kMaxMultilabelOutputs = 62;

/// Turns a multi-label model's run into bitmasks (RunData::multilabel): labels from the attribute
/// columns `target_columns` (output o's truth is attributes[s × K + target_columns[o]]),
/// predictions from the sign of the stored logits (scores[s × O + o] > 0, the model's decision
/// at probability 0.5). Throws UsageError for more than kMaxMultilabelOutputs outputs or a column
/// outside the run's attributes.
void make_multilabel(RunData& run, const std::vector<int64_t>& target_columns);

/// The CSR rows of one mode turned into columns (what finish() does for every mode).
ExpertColumns to_columns(const cache::SparseRows& rows, int64_t experts);

}  // namespace mumoe::analysis
