#include "analysis/run_data.h"

#include <algorithm>
#include <limits>

#include "analysis/row_norms.h"
#include "cache/cache_repair.h"
#include "io/errors.h"

namespace mumoe::analysis {

void RunData::reserve_like(const cache::ChunkRecord& first, int64_t chunks) {
  // An estimate, so bounded: a damaged runs row may claim 2^53 chunks, and a reservation that
  // large would fail (or take the memory) before the first missing chunk is reported.
  // Beyond 2^27 entries per vector (1 GB of doubles) the vectors grow as they fill.
  constexpr size_t kMostEntries = size_t{1} << 27;
  const auto bounded_chunks = static_cast<size_t>(std::min<int64_t>(chunks, int64_t{1} << 24));
  const auto times = [&](size_t n) { return std::min(kMostEntries, n * bounded_chunks); };
  labels.reserve(times(first.labels.size()));
  predictions.reserve(times(first.predictions.size()));
  scores.reserve(times(first.scores.size()));
  inputs.reserve(times(first.inputs.size()));
  attributes.reserve(times(first.attributes.size()));
  coefficient_mass.reserve(times(static_cast<size_t>(first.count) * first.coefficients.size()));
  coefficients.resize(first.coefficients.size());
  for (size_t e = 0; e < first.coefficients.size(); ++e) {
    auto& all = coefficients[e];
    if (all.offsets.empty()) all.offsets = {0};
    all.offsets.reserve(times(first.coefficients[e].offsets.size()));
    all.indices.reserve(times(first.coefficients[e].indices.size()));
    all.values.reserve(times(first.coefficients[e].values.size()));
  }
}

void RunData::append(const cache::ChunkRecord& chunk) {
  labels.insert(labels.end(), chunk.labels.begin(), chunk.labels.end());
  predictions.insert(predictions.end(), chunk.predictions.begin(), chunk.predictions.end());
  scores.insert(scores.end(), chunk.scores.begin(), chunk.scores.end());
  inputs.insert(inputs.end(), chunk.inputs.begin(), chunk.inputs.end());
  attributes.insert(attributes.end(), chunk.attributes.begin(), chunk.attributes.end());
  if (coefficients.empty()) {
    coefficients.resize(chunk.coefficients.size());
    for (auto& rows : coefficients) rows.offsets = {0};
  }
  const auto masses = coefficient_masses(chunk.coefficients, chunk.count);  // while the chunk is at hand
  coefficient_mass.insert(coefficient_mass.end(), masses.begin(), masses.end());
  for (size_t e = 0; e < chunk.coefficients.size(); ++e) {
    auto& all = coefficients[e];
    const auto& part = chunk.coefficients[e];
    const int64_t base = all.offsets.back();
    for (size_t i = 1; i < part.offsets.size(); ++i) all.offsets.push_back(base + part.offsets[i]);
    all.indices.insert(all.indices.end(), part.indices.begin(), part.indices.end());
    all.values.insert(all.values.end(), part.values.begin(), part.values.end());
  }
}

std::vector<double> dense_coefficients(const RunData& run, int64_t mode, int64_t sample) {
  if (mode < 0 || mode >= run.modes() || sample < 0 || sample >= run.samples())
    throw UsageError("sample " + std::to_string(sample) + " of mode " + std::to_string(mode) + " does not exist (" +
                     std::to_string(run.samples()) + " samples, " + std::to_string(run.modes()) + " mode(s))");
  const auto& rows = run.coefficients[static_cast<size_t>(mode)];
  std::vector<double> dense(static_cast<size_t>(run.info.expert_dims[static_cast<size_t>(mode)]), 0.0);
  for (auto k = rows.offsets[static_cast<size_t>(sample)]; k < rows.offsets[static_cast<size_t>(sample) + 1]; ++k)
    dense[static_cast<size_t>(rows.indices[static_cast<size_t>(k)])] = rows.values[static_cast<size_t>(k)];
  return dense;
}

namespace {

// Columns of rows that each hold every expert (a softmax gate's): a transpose of the dense
// [S, N] values, in tiles so that reads and writes both stay within a few pages. The scatter
// below wrote 1,024 columns' samples and values at once (2,048 interleaved streams) and took
// ~180 ms for 10,000 such rows (2026-11-26).
ExpertColumns full_rows_to_columns(const cache::SparseRows& rows, int64_t experts, int64_t samples) {
  ExpertColumns c;
  c.offsets.resize(static_cast<size_t>(experts) + 1);
  for (int64_t n = 0; n <= experts; ++n) c.offsets[n] = n * samples;
  c.samples.resize(static_cast<size_t>(samples * experts));
  c.values.resize(static_cast<size_t>(samples * experts));
  for (int64_t n = 0; n < experts; ++n)
    for (int64_t s = 0; s < samples; ++s) c.samples[n * samples + s] = s;
  constexpr int64_t kTile = 32;
  for (int64_t s0 = 0; s0 < samples; s0 += kTile)
    for (int64_t n0 = 0; n0 < experts; n0 += kTile)
      for (int64_t n = n0; n < std::min(experts, n0 + kTile); ++n)
        for (int64_t s = s0; s < std::min(samples, s0 + kTile); ++s)
          c.values[n * samples + s] = rows.values[s * experts + n];
  return c;
}

}  // namespace

std::vector<double> coefficient_masses(const std::vector<cache::SparseRows>& modes, int64_t samples) {
  const size_t count = modes.size();
  std::vector<double> out(static_cast<size_t>(samples) * count, std::numeric_limits<double>::infinity());
  for (size_t e = 0; e < count; ++e) {
    const auto& rows = modes[e];
    for (int64_t i = 0; i < samples && i + 1 < static_cast<int64_t>(rows.offsets.size()); ++i)
      out[static_cast<size_t>(i) * count + e] =
          sum_of_abs(rows.values.data() + rows.offsets[i], rows.offsets[i + 1] - rows.offsets[i]);
  }
  return out;
}

void make_multilabel(RunData& run, const std::vector<int64_t>& target_columns) {
  const auto outputs = static_cast<int64_t>(target_columns.size());
  if (outputs > kMaxMultilabelOutputs)
    throw UsageError("a multi-label analysis holds at most " + std::to_string(kMaxMultilabelOutputs) +
                     " outputs; this model has " + std::to_string(outputs));
  const int64_t samples = run.samples(), k = run.info.attribute_count, width = run.info.output_dim;
  if (width != outputs)
    throw UsageError("the run stores " + std::to_string(width) + " outputs per sample, the model has " +
                     std::to_string(outputs));
  for (auto c : target_columns)
    if (c < 0 || c >= k)
      throw UsageError("attribute column " + std::to_string(c) + " is not among the run's " + std::to_string(k));
  if (static_cast<int64_t>(run.attributes.size()) != samples * k ||
      static_cast<int64_t>(run.scores.size()) != samples * outputs)
    throw UsageError("the run's attributes or scores do not cover its samples");
  for (int64_t s = 0; s < samples; ++s) {
    int64_t truth = 0, decided = 0;
    for (int64_t o = 0; o < outputs; ++o) {
      if (run.attributes[s * k + target_columns[o]]) truth |= int64_t{1} << o;
      if (run.scores[s * outputs + o] > 0) decided |= int64_t{1} << o;
    }
    run.labels[s] = truth;
    run.predictions[s] = decided;
  }
  run.multilabel = true;
}

ExpertColumns to_columns(const cache::SparseRows& rows, int64_t experts) {
  const int64_t samples = static_cast<int64_t>(rows.offsets.size()) - 1;
  if (samples > 0 && static_cast<int64_t>(rows.indices.size()) == samples * experts)
    return full_rows_to_columns(rows, experts, samples);  // valid rows: each holds 0 … N − 1
  ExpertColumns c;
  c.offsets.assign(experts + 1, 0);
  for (auto n : rows.indices) ++c.offsets[n + 1];
  for (int64_t n = 0; n < experts; ++n) c.offsets[n + 1] += c.offsets[n];
  c.samples.resize(rows.indices.size());
  c.values.resize(rows.indices.size());
  std::vector<int64_t> next(c.offsets.begin(), c.offsets.end() - 1);
  for (int64_t s = 0; s < samples; ++s)  // rows in sample order keep each column sorted
    for (int64_t k = rows.offsets[s]; k < rows.offsets[s + 1]; ++k) {
      const auto slot = next[rows.indices[k]]++;
      c.samples[slot] = s;
      c.values[slot] = rows.values[k];
    }
  return c;
}

void RunData::finish() {
  columns.clear();
  for (size_t e = 0; e < coefficients.size(); ++e) columns.push_back(to_columns(coefficients[e], info.expert_dims[e]));
}

RunData load_run_data(const cache::AnalysisCache& cache, int64_t run_id, const ChunkCompletion& complete) {
  if (!cache.run_complete(run_id))
    throw UsageError("analysis run " + std::to_string(run_id) + " in " + cache.path() +
                     " is not complete: run `mumoe analyze` first");
  RunData data;
  const auto damaged = [&](const std::string& problem) { return cache::damaged_cache_error(cache.path(), problem); };
  try {
    data.info = cache.run_info(run_id);
  } catch (const FileError& e) {
    throw damaged(e.problem());
  }
  for (int64_t c = 0; c < data.info.chunk_count(); ++c) {
    cache::ChunkRecord chunk;
    try {
      chunk = cache.get_chunk(run_id, c);
    } catch (const FileError& e) {
      throw damaged(e.problem());
    }
    const auto where = "run " + std::to_string(run_id) + ", chunk " + std::to_string(c);
    // The completion's own errors say their own remedy (a recomputation that disagrees with the
    // extraction is not damage that `cache repair` could see).
    if ((chunk.inputs.empty() || chunk.leaves_modes_to_model()) && complete) complete(chunk);
    if (chunk.inputs.empty())  // the data set's own features (ChunkRecord::inputs)
      throw damaged(where + " stores no layer inputs, and its layer does not read the data's features");
    if (chunk.leaves_modes_to_model())
      throw damaged(where + " leaves coefficients to the model, and no model was given to recompute them");
    // Consumers read the inputs by the run's shapes (decoding checks the stored ones; these may
    // have come from the completion).
    if (static_cast<int64_t>(chunk.inputs.size()) != chunk.count * data.info.input_dim)
      throw damaged(where + " has " + std::to_string(chunk.inputs.size()) + " input values, not " +
                    std::to_string(chunk.count) + " × " + std::to_string(data.info.input_dim));
    if (c == 0) data.reserve_like(chunk, data.info.chunk_count());
    data.append(chunk);
  }
  if (data.samples() != data.info.sample_count)
    throw damaged("run " + std::to_string(run_id) + " holds " + std::to_string(data.samples()) +
                  " samples but should hold " + std::to_string(data.info.sample_count));
  data.finish();
  return data;
}

std::string class_index_problem(const std::vector<int64_t>& labels, const std::vector<int64_t>& predictions,
                                int64_t class_count, int64_t first_sample) {
  const auto outside = [&](const std::vector<int64_t>& values, const char* what) -> std::string {
    for (size_t i = 0; i < values.size(); ++i)
      if (values[i] < 0 || values[i] >= class_count)
        return "sample " + std::to_string(first_sample + static_cast<int64_t>(i)) + ": " + what + " " +
               std::to_string(values[i]) + " outside the model's " + std::to_string(class_count) + " classes";
    return "";
  };
  if (auto p = outside(labels, "label"); !p.empty()) return p;
  return outside(predictions, "prediction");
}

}  // namespace mumoe::analysis
