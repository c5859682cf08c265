#include "analysis/counterfactual_ablation.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iterator>
#include <limits>
#include <set>

#include "analysis/row_norms.h"
#include "analysis/tensor_records.h"
#include "io/blas_threads.h"
#include "io/errors.h"
#include "nn/device.h"

namespace mumoe::analysis {
namespace {

// Rows per batched re-evaluation: large enough for efficient matrix products, small enough that
// the dense coefficient rows of a 1024-expert mode stay around 100 MB.
constexpr int64_t kRowsPerBatch = 12288;

// Pairs per batch and samples per context block of the rank-one sweep: a few MB of float64 per
// tensor.
constexpr int64_t kPairsPerBatch = 8192;
constexpr int64_t kSamplesPerContext = 1024;
// A click's correction in smaller blocks: its float64 contexts and their products are the click's
// largest memory (1,024 × R = 512: 4 MB each), and on this project's VMs writing memory the
// process never touched costs ~16 µs per 4 KB page (2026-11-25) — blocks of 128 samples reuse the
// same half-megabyte buffers. The sweep keeps 1,024: there the pairs, not the contexts, dominate.
constexpr int64_t kSamplesPerClickContext = 128;

// Each row's argmax (the first index among equal maxima, as argmax) and the rows whose top two
// scores are within tolerance(row) of each other. `scores`: contiguous float64 [P, O] on the CPU.
struct RowTops {
  std::vector<int64_t> argmax, tied;
};
template <typename Tolerance>
RowTops top_of_rows(const torch::Tensor& scores, const Tolerance& tolerance) {
  const int64_t rows = scores.size(0), classes = scores.size(1);
  const auto* y = scores.data_ptr<double>();
  RowTops out;
  out.argmax.resize(static_cast<size_t>(rows));
  for (int64_t b = 0; b < rows; ++b) {
    const auto top = top_two(y + b * classes, classes);
    out.argmax[static_cast<size_t>(b)] = top.index;
    if (top.first - top.second <= tolerance(b)) out.tied.push_back(b);
  }
  return out;
}

// The coefficients of the removed `experts` at `samples` (ascending, each using at least one of
// them: affected_samples): [B, K] float64, 0 where a sample does not use an expert. Read from the
// experts' own columns (CSC), one pass over each column beside the samples: the sample rows
// (CSR) hold every expert of a dense gate, and scanning 10,000 rows of 1,024 softmax
// coefficients for one column was most of a click on such a head (2026-11-26).
torch::Tensor removed_coefficients(const ExpertColumns& columns, const std::vector<int64_t>& samples,
                                   const std::vector<int64_t>& experts) {
  const int64_t count = static_cast<int64_t>(samples.size()), removed = static_cast<int64_t>(experts.size());
  auto out = torch::zeros({count, removed}, torch::kFloat64);
  auto* w = out.data_ptr<double>();
  for (int64_t k = 0; k < removed; ++k) {
    int64_t b = 0;  // both the column's samples and `samples` ascend
    for (int64_t e = columns.offsets[experts[k]]; e < columns.offsets[experts[k] + 1]; ++e) {
      while (b < count && samples[b] < columns.samples[e]) ++b;
      if (b < count && samples[b] == columns.samples[e]) w[b * removed + k] = columns.values[e];
    }
  }
  return out;
}

// Each row's prediction from its scores [B, O]: the argmax class, or for a multi-label run the
// bitmask of the outputs whose logit is positive (RunData::multilabel).
torch::Tensor decisions(const torch::Tensor& scores, bool multilabel) {
  if (!multilabel) return scores.argmax(1);
  const auto positive = (scores > 0).to(torch::kCPU, torch::kLong).contiguous();
  const int64_t rows = positive.size(0), outputs = positive.size(1);
  auto out = torch::zeros({rows}, torch::kLong);
  const auto* p = positive.data_ptr<int64_t>();
  auto* w = out.data_ptr<int64_t>();
  for (int64_t b = 0; b < rows; ++b)
    for (int64_t o = 0; o < outputs; ++o) w[b] |= p[b * outputs + o] << o;
  return out;
}

std::vector<int64_t> to_vector(const torch::Tensor& t) {
  const auto c = t.to(torch::kCPU, torch::kLong).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

const nn::MuMoEBlock& checked_layer(const nn::MuMoEBlock& layer, const RunData& run) {
  if (layer->config().expert_dims != run.info.expert_dims || layer->config().input_dim != run.info.input_dim)
    throw UsageError("the layer does not match the analysis run (expert counts or input width differ)");
  return layer;
}

}  // namespace

std::string to_string(AblationMethod m) { return m == AblationMethod::Naive ? "naive" : "sparse"; }

AblationMethod parse_ablation_method(const std::string& text) {
  if (text == "sparse") return AblationMethod::Sparse;
  if (text == "naive") return AblationMethod::Naive;
  throw UsageError("unknown ablation method '" + text + "' (expected sparse or naive)");
}

CounterfactualAblation::CounterfactualAblation(const nn::MuMoEBlock& layer, const RunData& run, int64_t class_count,
                                               const std::string& device)
    : run_(run),
      device_(nn::parse_device(device)),
      exact_(checked_layer(layer, run), device_),
      class_count_(class_count) {
  // A view, not a float64 copy: converting all 10,000 × 128 inputs up front was most of a first
  // click (30–40 ms measured, 2026-11-24); each path converts the rows it evaluates.
  inputs_ = torch::from_blob(const_cast<float*>(run.inputs.data()), {run.samples(), run.info.input_dim},
                             torch::kFloat32);
  before_ = accuracy_of(run.labels, run.predictions, class_count, run.multilabel);
}

void CounterfactualAblation::check_mode(int64_t mode) const {
  if (mode < 0 || mode >= run_.modes())
    throw UsageError("expert mode " + std::to_string(mode) + " does not exist (the layer has " +
                     std::to_string(run_.modes()) + ")");
}

std::vector<int64_t> CounterfactualAblation::affected_samples(int64_t mode, const std::vector<int64_t>& experts) const {
  // The union of the experts' columns, ascending (a column's samples ascend): a sorted vector, not
  // a std::set, which cost a millisecond per 10,000 samples of a dense gate's click.
  // Each union stays at most the samples' count: O(experts × samples) for any set.
  const auto& cols = run_.columns[mode];
  std::vector<int64_t> affected, merged;
  for (auto n : experts) {
    merged.clear();
    std::set_union(affected.begin(), affected.end(), cols.samples.begin() + cols.offsets[n],
                   cols.samples.begin() + cols.offsets[n + 1], std::back_inserter(merged));
    affected.swap(merged);
  }
  return affected;
}

void CounterfactualAblation::check(int64_t mode, const std::vector<int64_t>& experts) const {
  check_mode(mode);
  for (auto n : experts)
    if (n < 0 || n >= run_.info.expert_dims[mode])
      throw UsageError("cannot ablate expert " + std::to_string(n) + " of mode " + std::to_string(mode) +
                       ": the mode has experts 0–" + std::to_string(run_.info.expert_dims[mode] - 1));
  if (experts.empty()) throw UsageError("no experts to ablate");
  require_distinct_experts(experts);
}

torch::Tensor CounterfactualAblation::predict_rows(const torch::Tensor& samples, int64_t mode,
                                                   const torch::Tensor& zero_row, const torch::Tensor& zero_expert) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> coefficients;
  for (int64_t e = 0; e < run_.modes(); ++e) {
    auto a = dense_rows(run_.coefficients[e], samples, run_.info.expert_dims[e]);
    if (e == mode) a.index_put_({zero_row, zero_expert}, 0.0);  // a_n := 0, no renormalisation
    coefficients.push_back(a.to(device_));
  }
  // The arithmetic of extraction and of the naive oracle (exact_layer.h), so that a near-tie is
  // decided by the same sums.
  return decisions(exact_.output_from_coefficients(inputs_.index_select(0, samples).to(device_), coefficients),
                   run_.multilabel)
      .cpu();
}

const torch::Tensor& CounterfactualAblation::stored_scores() {
  if (scores_.defined()) return scores_;
  const int64_t samples = run_.samples(), classes = run_.info.output_dim, input_dim = run_.info.input_dim;
  // A view of the run's scores, which outlive this engine and nothing writes (as inputs_). One
  // plain pass below makes the margins and tolerances: a first click paid ~2.5 ms for the
  // tensor ops that did it before (a copy, topk, abs, amax; 2026-11-27).
  scores_ = torch::from_blob(const_cast<double*>(run_.scores.data()), {samples, classes}, torch::kFloat64);
  margins_ = torch::empty({samples}, torch::kFloat64);
  tie_tolerance_ = torch::empty({samples}, torch::kFloat64);
  auto* margin = margins_.data_ptr<double>();
  auto* tolerance = tie_tolerance_.data_ptr<double>();
  // Extraction stored the float32 arithmetic's scores in most rows of such a layer, each within
  // e_s of the exact value (ExactLayer::certified_scores), and the float64 arithmetic's in the
  // rest. A corrected float32 score is then within e_s (plus rounding) of the oracle's, so two
  // classes of such a row count as tied within 2 e_s more. A row stored by the float64
  // arithmetic — it holds a score no float can hold — keeps the plain tolerance, as does every
  // row of a run extracted before scores were float32 (reading a float64 row as float32 would
  // only cost time, never exactness).
  const bool float32_scores = exact_.has_float32_score_bound();
  const int64_t modes = run_.modes();
  // ‖a_e‖₁ per sample and mode: made at load, or here for a run built otherwise.
  const bool mass_made = static_cast<int64_t>(run_.coefficient_mass.size()) == samples * modes;
  const auto made_here = mass_made || !float32_scores ? std::vector<double>() : coefficient_masses(run_.coefficients, samples);
  const double* masses = mass_made ? run_.coefficient_mass.data() : made_here.data();
  for (int64_t s = 0; s < samples; ++s) {
    const double* y = run_.scores.data() + s * classes;
    double largest = 0;
    bool float32_row = float32_scores;
    for (int64_t o = 0; o < classes; ++o) {
      largest = std::max(largest, std::abs(y[o]));
      float32_row = float32_row && static_cast<double>(static_cast<float>(y[o])) == y[o];
    }
    const auto top = top_two(y, classes);
    margin[s] = top.first - top.second;  // one class: no rival, an infinite margin
    // Scores closer than this count as tied: the rank-one results and the oracle's full
    // re-evaluation differ by rounding (~1e-16 of the scores), far below it.
    tolerance[s] = 1e-9 * (1 + largest);
    if (!float32_row) continue;
    tolerance[s] += 2 * exact_.float32_score_error(run_.inputs.data() + s * input_dim, masses + s * modes);
  }
  return scores_;
}

RankOneAblation* CounterfactualAblation::rank_one(int64_t mode) {
  if (!RankOneAblation::supports(exact_.gate_layer())) return nullptr;
  auto& engine = rank_one_[mode];
  // From the gate-dtype copy, which nothing modifies: the engine widens what it reads.
  if (!engine) engine = std::make_unique<RankOneAblation>(exact_.gate_layer(), mode);
  return engine.get();
}

std::vector<torch::Tensor> CounterfactualAblation::dense_coefficients(const torch::Tensor& samples,
                                                                     int64_t skip_mode) const {
  std::vector<torch::Tensor> out;
  for (int64_t e = 0; e < run_.modes(); ++e)
    out.push_back(e == skip_mode ? torch::Tensor()
                                 : dense_rows(run_.coefficients[e], samples, run_.info.expert_dims[e])
                                       .to(device_, torch::kFloat64));
  return out;
}

std::vector<int64_t> CounterfactualAblation::predictions_rank_one(int64_t mode, const std::vector<int64_t>& samples,
                                                                  const std::vector<int64_t>& experts) {
  torch::NoGradGuard no_grad;
  const io::SingleThreadedBlas small_products;  // products of a few million multiply-adds (blas_threads.h)
  auto* engine = rank_one(mode);
  const auto& scores = stored_scores();
  const auto removed = to_tensor(experts).to(device_);
  std::vector<int64_t> out;
  out.reserve(samples.size());
  const auto all_weights = removed_coefficients(run_.columns[mode], samples, experts);
  const auto block = static_cast<size_t>(kSamplesPerClickContext);
  for (size_t begin = 0; begin < samples.size(); begin += block) {
    const auto part = to_tensor(std::vector<int64_t>(samples.begin() + begin,
                                                     samples.begin() + std::min(samples.size(), begin + block)));
    engine->set_contexts(inputs_.index_select(0, part).to(device_, torch::kFloat64), dense_coefficients(part, mode),
                         /*bounds=*/false);
    const auto weights = all_weights.slice(0, static_cast<int64_t>(begin), static_cast<int64_t>(begin) + part.size(0));
    const auto after =
        (scores.index_select(0, part).to(device_) - engine->set_deltas(removed, weights.to(device_))).cpu().contiguous();
    const auto* tolerance = tie_tolerance_.data_ptr<double>();
    const auto* sample_of = part.data_ptr<int64_t>();
    const auto best = top_of_rows(after, [&](int64_t b) { return tolerance[sample_of[b]]; });
    auto p = best.argmax;
    if (!best.tied.empty()) {
      // Near-ties: the exact re-evaluation, with every removed expert zeroed in each row.
      std::vector<int64_t> zero_rows, zero_experts;
      for (size_t t = 0; t < best.tied.size(); ++t)
        for (auto n : experts) {
          zero_rows.push_back(static_cast<int64_t>(t));
          zero_experts.push_back(n);
        }
      const auto tied = to_tensor(best.tied);
      const auto exact =
          to_vector(predict_rows(part.index_select(0, tied), mode, to_tensor(zero_rows), to_tensor(zero_experts)));
      for (size_t t = 0; t < best.tied.size(); ++t) p[best.tied[t]] = exact[t];
    }
    out.insert(out.end(), p.begin(), p.end());
  }
  return out;
}

void CounterfactualAblation::sweep_rank_one(int64_t mode, const SweepCallback& progress,
                                            std::vector<std::vector<int64_t>>* correct_delta,
                                            std::vector<int64_t>* changed) {
  torch::NoGradGuard no_grad;
  const io::SingleThreadedBlas small_products;  // products of a few million multiply-adds (blas_threads.h)
  auto* engine = rank_one(mode);
  const auto& scores = stored_scores();
  const int64_t experts = run_.info.expert_dims[mode], samples = run_.samples();
  const auto* tolerance = tie_tolerance_.data_ptr<double>();
  const auto& rows = run_.coefficients[mode];  // CSR: a sample's (expert, a) pairs are contiguous
  for (int64_t first = 0; first < samples; first += kSamplesPerContext) {
    const int64_t last = std::min(samples, first + kSamplesPerContext);
    const auto block = torch::arange(first, last, torch::kLong);
    // The removed mode's own coefficients are not part of the context.
    engine->set_contexts(inputs_.slice(0, first, last).to(device_, torch::kFloat64), dense_coefficients(block, mode));
    // Only pairs whose bound reaches the sample's margin can change its prediction.
    const auto limits = (margins_.slice(0, first, last) - tie_tolerance_.slice(0, first, last)).contiguous();
    const auto pairs = engine->pairs_that_may_change(rows, first, limits.data_ptr<double>());
    const auto pair_row = to_tensor(pairs.rows), pair_expert = to_tensor(pairs.experts);
    const auto pair_a = torch::tensor(pairs.a, torch::kFloat64);
    const int64_t count = pair_row.numel();
    for (int64_t begin = 0; begin < count; begin += kPairsPerBatch) {
      const int64_t end = std::min(count, begin + kPairsPerBatch);
      const auto row = pair_row.slice(0, begin, end), expert = pair_expert.slice(0, begin, end);
      const auto sample = row + first;
      const auto after = (scores.index_select(0, sample).to(device_) -
                          engine->pair_deltas(row.to(device_), expert.to(device_), pair_a.slice(0, begin, end).to(device_)))
                             .cpu()
                             .contiguous();
      // Plain loops from here: a handful of numbers per pair, where tensor ops cost more to launch.
      const auto best = top_of_rows(after, [&](int64_t b) { return tolerance[first + pairs.rows[begin + b]]; });
      auto predicted = best.argmax;
      if (!best.tied.empty()) {
        // Near-ties: the exact re-evaluation of those rows with the pair's expert zeroed.
        const auto tied = to_tensor(best.tied);
        const auto exact = to_vector(predict_rows(sample.index_select(0, tied), mode,
                                                  torch::arange(tied.numel(), torch::kLong), expert.index_select(0, tied)));
        for (size_t t = 0; t < best.tied.size(); ++t) predicted[best.tied[t]] = exact[t];
      }
      for (int64_t b = 0; b < end - begin; ++b) {
        const int64_t s = first + pairs.rows[begin + b], n = pairs.experts[begin + b];
        const int64_t old = run_.predictions[s], label = run_.labels[s];
        if (predicted[b] == old) continue;
        ++(*changed)[n];
        (*correct_delta)[n][label] += (predicted[b] == label) - (old == label);
      }
    }
    if (progress && !progress(experts * last / samples, experts)) throw Cancelled();
  }
}

std::vector<int64_t> CounterfactualAblation::predict_all() {
  torch::NoGradGuard no_grad;
  std::vector<int64_t> out;
  const int64_t chunk = run_.info.chunk_size;  // the extraction's batches: identical BatchNorm/BLAS shapes
  for (int64_t begin = 0; begin < run_.samples(); begin += chunk) {
    const auto x = inputs_.slice(0, begin, std::min(run_.samples(), begin + chunk)).to(device_);
    const auto p = to_vector(decisions(exact_.forward(x).output, run_.multilabel));
    out.insert(out.end(), p.begin(), p.end());
  }
  return out;
}

void CounterfactualAblation::zero_expert_slices(int64_t mode, const std::vector<int64_t>& experts,
                                                std::vector<torch::Tensor>* saved) {
  torch::NoGradGuard no_grad;
  const auto block = exact_.float64_layer();  // the oracle's arithmetic
  const bool cp = block->config().factorization == nn::Factorization::CP;
  for (auto layer : {block->first_layer(), block->second_layer()}) {
    if (layer.is_empty()) continue;
    auto factor = layer->factors()[mode];  // CP: [N, R] (experts on dim 0); TR: [R, N, R'] (dim 1)
    for (auto n : experts) {
      auto slice = factor.select(cp ? 0 : 1, n);
      saved->push_back(slice.clone());
      slice.zero_();
    }
  }
}

void CounterfactualAblation::restore_expert_slices(int64_t mode, const std::vector<int64_t>& experts,
                                                   const std::vector<torch::Tensor>& saved) {
  torch::NoGradGuard no_grad;
  const auto block = exact_.float64_layer();
  const bool cp = block->config().factorization == nn::Factorization::CP;
  size_t k = 0;
  for (auto layer : {block->first_layer(), block->second_layer()}) {
    if (layer.is_empty()) continue;
    auto factor = layer->factors()[mode];
    for (auto n : experts) factor.select(cp ? 0 : 1, n).copy_(saved[k++]);
  }
}

std::vector<int64_t> CounterfactualAblation::predictions_after(int64_t mode, const std::vector<int64_t>& experts,
                                                               AblationMethod method) {
  check(mode, experts);
  if (method == AblationMethod::Naive) {
    std::vector<torch::Tensor> saved;
    zero_expert_slices(mode, experts, &saved);
    std::vector<int64_t> predictions;
    try {
      predictions = predict_all();
    } catch (...) {
      restore_expert_slices(mode, experts, saved);
      throw;
    }
    restore_expert_slices(mode, experts, saved);
    return predictions;
  }
  const std::set<int64_t> removed(experts.begin(), experts.end());
  auto predictions = run_.predictions;
  const auto samples = affected_samples(mode, experts);
  // The rank-one bounds decide an argmax; a multi-label run's decisions (signs) re-evaluate rows.
  if (!run_.multilabel && rank_one(mode)) {
    const auto p = predictions_rank_one(mode, samples, {removed.begin(), removed.end()});
    for (size_t b = 0; b < samples.size(); ++b) predictions[samples[b]] = p[b];
    return predictions;
  }
  for (size_t begin = 0; begin < samples.size(); begin += kRowsPerBatch) {
    const std::vector<int64_t> part(samples.begin() + begin,
                                    samples.begin() + std::min(samples.size(), begin + kRowsPerBatch));
    // Every removed expert is zeroed in every row (zeroing an a_n that is already 0 is a no-op).
    std::vector<int64_t> rows, zero_rows, zero_experts;
    for (size_t b = 0; b < part.size(); ++b)
      for (auto n : removed) {
        zero_rows.push_back(static_cast<int64_t>(b));
        zero_experts.push_back(n);
      }
    const auto p = to_vector(predict_rows(to_tensor(part), mode, to_tensor(zero_rows), to_tensor(zero_experts)));
    for (size_t b = 0; b < part.size(); ++b) predictions[part[b]] = p[b];
  }
  return predictions;
}

AblationOutcome CounterfactualAblation::outcome(int64_t mode, const std::vector<int64_t>& experts,
                                                const std::vector<int64_t>& predictions, int64_t affected) const {
  return ablation_outcome(run_, before_, class_count_, mode, experts, predictions, affected);
}

AblationOutcome ablation_outcome(const RunData& run, const ClassAccuracy& before, int64_t class_count, int64_t mode,
                                 const std::vector<int64_t>& experts, const std::vector<int64_t>& predictions,
                                 int64_t affected) {
  AblationOutcome o;
  o.mode = mode;
  o.experts = experts;
  o.after = accuracy_of(run.labels, predictions, class_count, run.multilabel);
  o.drop = accuracy_drop(before, o.after);
  o.polysemanticity = polysemanticity(o.drop);
  o.has_effect = has_effect(o.drop);
  o.affected_samples = affected;
  for (size_t s = 0; s < predictions.size(); ++s) o.changed_predictions += predictions[s] != run.predictions[s];
  return o;
}

AblationOutcome CounterfactualAblation::ablate(int64_t mode, const std::vector<int64_t>& experts,
                                               AblationMethod method) {
  // Only the size is needed here: per expert, support(n) is it without building the set.
  const auto predictions = predictions_after(mode, experts, method);
  const int64_t affected = experts.size() == 1 ? run_.columns[mode].support(experts[0])
                                                : static_cast<int64_t>(affected_samples(mode, experts).size());
  return outcome(mode, experts, predictions, affected);
}

SweepOutcome CounterfactualAblation::sweep_sparse(int64_t mode, const SweepCallback& progress) {
  const auto& cols = run_.columns[mode];
  const int64_t experts = run_.info.expert_dims[mode];
  // Per expert, the class-wise change in correct predictions; a sample counts only where its
  // prediction flips into or out of being correct.
  std::vector<std::vector<int64_t>> correct_delta(experts, std::vector<int64_t>(class_count_, 0));
  std::vector<int64_t> changed(experts, 0);

  const bool by_rank_one = !run_.multilabel && rank_one(mode);
  int64_t next_expert = by_rank_one ? experts : 0;
  if (by_rank_one) sweep_rank_one(mode, progress, &correct_delta, &changed);
  while (next_expert < experts) {
    // Batch whole experts' supports until the batch is full (an expert larger than a batch
    // gets a batch of its own).
    std::vector<int64_t> samples, zero_rows, zero_experts, owner;
    while (next_expert < experts &&
           (samples.empty() || static_cast<int64_t>(samples.size()) + cols.support(next_expert) <= kRowsPerBatch)) {
      for (int64_t k = cols.offsets[next_expert]; k < cols.offsets[next_expert + 1]; ++k) {
        zero_rows.push_back(static_cast<int64_t>(samples.size()));
        zero_experts.push_back(next_expert);
        samples.push_back(cols.samples[k]);
        owner.push_back(next_expert);
      }
      ++next_expert;
    }
    if (!samples.empty()) {
      const auto p = to_vector(predict_rows(to_tensor(samples), mode, to_tensor(zero_rows), to_tensor(zero_experts)));
      for (size_t b = 0; b < samples.size(); ++b) {
        const auto s = samples[b];
        const auto old_prediction = run_.predictions[s];
        if (p[b] == old_prediction) continue;
        ++changed[owner[b]];
        const auto y = run_.labels[s];
        if (run_.multilabel) {  // each output whose bit flipped turns correct or wrong
          const auto wrong_before = old_prediction ^ y, wrong_after = p[b] ^ y;
          for (int64_t o = 0; o < class_count_; ++o)
            correct_delta[owner[b]][o] += ((wrong_before >> o) & 1) - ((wrong_after >> o) & 1);
        } else {
          correct_delta[owner[b]][y] += (p[b] == y) - (old_prediction == y);
        }
      }
    }
    if (progress && !progress(next_expert, experts)) throw Cancelled();
  }

  SweepOutcome sweep;
  for (int64_t n = 0; n < experts; ++n) {
    AblationOutcome o;
    o.mode = mode;
    o.experts = {n};
    o.after = before_;
    int64_t correct_total = 0, count_total = 0;
    for (int64_t c = 0; c < class_count_; ++c) {
      o.after.correct[c] += correct_delta[n][c];
      o.after.per_class[c] = o.after.count[c] ? static_cast<double>(o.after.correct[c]) / o.after.count[c] : 0.0;
      correct_total += o.after.correct[c];
      count_total += o.after.count[c];
    }
    o.after.overall = count_total ? static_cast<double>(correct_total) / count_total : 0.0;
    o.drop = accuracy_drop(before_, o.after);
    o.polysemanticity = polysemanticity(o.drop);
    o.has_effect = has_effect(o.drop);
    o.affected_samples = cols.support(n);
    o.changed_predictions = changed[n];
    sweep.experts.push_back(std::move(o));
  }
  return sweep;
}

SweepOutcome CounterfactualAblation::sweep(int64_t mode, AblationMethod method, const SweepCallback& progress) {
  check_mode(mode);
  const auto start = std::chrono::steady_clock::now();
  SweepOutcome sweep;
  if (method == AblationMethod::Sparse) {
    sweep = sweep_sparse(mode, progress);
  } else {
    const int64_t experts = run_.info.expert_dims[mode];
    for (int64_t n = 0; n < experts; ++n) {
      sweep.experts.push_back(ablate(mode, {n}, AblationMethod::Naive));
      if (progress && !progress(n + 1, experts)) throw Cancelled();
    }
  }
  sweep.mode = mode;
  sweep.method = method;
  summarise_sweep(sweep);
  sweep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return sweep;
}

}  // namespace mumoe::analysis
