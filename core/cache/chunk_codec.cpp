#include "cache/chunk_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

namespace mumoe::cache {
namespace {

// Bounds that keep every element and byte count below 2^62, so size arithmetic cannot overflow
// (also for shapes read back from a damaged file).
constexpr int64_t kMaxChunkSize = int64_t{1} << 24;
constexpr int64_t kMaxDim = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxSamples = int64_t{1} << 53;

std::string str(int64_t v) { return std::to_string(v); }

std::string size_problem(const char* field, std::size_t actual, int64_t expected, const std::string& why) {
  if (static_cast<int64_t>(actual) == expected) return "";
  return std::string(field) + ": has " + str(static_cast<int64_t>(actual)) + " entries, expected " + str(expected) +
         " (" + why + ")";
}

// offsets[0] == 0 and non-decreasing; the size is checked by the caller.
std::string offsets_problem(const std::vector<int64_t>& offsets) {
  if (offsets.empty()) return "offsets: empty";
  if (offsets[0] != 0) return "offsets: offsets[0] is " + str(offsets[0]) + ", expected 0";
  for (std::size_t i = 1; i < offsets.size(); ++i)
    if (offsets[i] < offsets[i - 1])
      return "offsets: decrease at row " + str(static_cast<int64_t>(i - 1)) + " (" + str(offsets[i - 1]) + " then " +
             str(offsets[i]) + ")";
  return "";
}

// Whether entries [begin, end) of a row are increasing expert indices in [0, experts) with finite
// values > 0. Branch-free counts, so that it vectorises: a softmax head's chunk holds count × N_e
// entries, and the per-entry checks with early exits took a tenth of extraction's writer thread
// (2026-11-26). rows_problem says what is wrong when this is false. Counting double comparisons
// into integers vectorises from SSE4.2 on (not with x86-64's baseline SSE2), hence the clones.
__attribute__((target_clones("avx2", "default"))) bool row_is_valid(const int32_t* indices, const double* values,
                                                                    int64_t begin, int64_t end, int64_t experts) {
  if (begin == end) return true;
  int64_t increasing = 0, positive_finite = 0;
  for (int64_t k = begin + 1; k < end; ++k) increasing += indices[k] > indices[k - 1];
  for (int64_t k = begin; k < end; ++k)
    positive_finite += (values[k] > 0) & (values[k] <= std::numeric_limits<double>::max());  // not NaN or ∞
  // Increasing indices are in range when the first and the last are.
  return indices[begin] >= 0 && indices[end - 1] < experts && increasing == end - begin - 1 &&
         positive_finite == end - begin;
}

std::string rows_problem(const SparseRows& rows, int64_t count, int64_t experts) {
  if (static_cast<int64_t>(rows.offsets.size()) != count + 1)
    return size_problem("offsets", rows.offsets.size(), count + 1, "count + 1");
  if (auto p = offsets_problem(rows.offsets); !p.empty()) return p;
  if (static_cast<int64_t>(rows.indices.size()) != rows.offsets.back())
    return size_problem("indices", rows.indices.size(), rows.offsets.back(), "the last offset");
  if (rows.values.size() != rows.indices.size())
    return size_problem("values", rows.values.size(), static_cast<int64_t>(rows.indices.size()), "one per index");
  for (int64_t row = 0; row < count; ++row) {
    if (row_is_valid(rows.indices.data(), rows.values.data(), rows.offsets[row], rows.offsets[row + 1], experts))
      continue;
    for (int64_t k = rows.offsets[row]; k < rows.offsets[row + 1]; ++k) {
      int32_t e = rows.indices[k];
      if (e < 0 || e >= experts)
        return "indices: expert " + str(e) + " in row " + str(row) + " is outside [0, " + str(experts) + ")";
      if (k > rows.offsets[row] && e <= rows.indices[k - 1])
        return "indices: not increasing in row " + str(row) + " (" + str(rows.indices[k - 1]) + " then " + str(e) + ")";
      double a = rows.values[k];
      if (!(a > 0) || !std::isfinite(a))
        return "values: entry " + str(k) + " (row " + str(row) + ") is " + std::to_string(a) +
               ", expected a finite a_n > 0";
    }
  }
  return "";
}

// A mode left to the model (ChunkRecord::left_to_model): every row full, nothing else held.
std::string left_mode_problem(const SparseRows& rows, int64_t count, int64_t experts) {
  if (static_cast<int64_t>(rows.offsets.size()) != count + 1)
    return size_problem("offsets", rows.offsets.size(), count + 1, "count + 1");
  for (int64_t row = 0; row <= count; ++row)
    if (rows.offsets[row] != row * experts)
      return "offsets: offsets[" + str(row) + "] is " + str(rows.offsets[row]) + ", expected " + str(row * experts) +
             " (a mode left to the model holds all " + str(experts) + " experts in every row)";
  if (!rows.indices.empty() || !rows.values.empty())
    return "values: a mode left to the model stores none, but " + str(static_cast<int64_t>(rows.values.size())) +
           " values and " + str(static_cast<int64_t>(rows.indices.size())) + " indices are given";
  return "";
}

// Whether every value survives a round trip through float. Branch-free, so that it vectorises
// (clones as above): |v| is clamped to float's range before converting (converting a double
// beyond it is undefined) and compared with itself, so a value beyond the range fails, as does NaN.
__attribute__((target_clones("avx2", "default"))) bool all_floats(const std::vector<double>& values) {
  constexpr double kMaxFloat = std::numeric_limits<float>::max();
  int64_t exact = 0;
  for (double v : values) {
    const double magnitude = std::fabs(v);
    const double clamped = std::min(magnitude, kMaxFloat);  // NaN stays NaN
    exact += static_cast<double>(static_cast<float>(clamped)) == magnitude;
  }
  return exact == static_cast<int64_t>(values.size());
}

template <class T>
std::vector<T> decode_array(BlobView blob, int64_t expected, const char* field) {
  const auto bytes = static_cast<int64_t>(blob.size);
  if (bytes != expected * static_cast<int64_t>(sizeof(T)))
    throw ChunkFormatError(std::string(field) + ": " + str(bytes) + " bytes, expected " + str(expected) + " × " +
                           str(sizeof(T)) + " = " + str(expected * static_cast<int64_t>(sizeof(T))));
  std::vector<T> out(static_cast<std::size_t>(expected));
  if (bytes > 0) std::memcpy(out.data(), blob.data, blob.size);  // the blob may be unaligned
  return out;
}

}  // namespace

std::string run_info_problem(const RunInfo& info) {
  if (info.sample_count < 0 || info.sample_count > kMaxSamples)
    return "sample_count: " + str(info.sample_count) + " is outside [0, 2^53]";
  if (info.chunk_size < 1 || info.chunk_size > kMaxChunkSize)
    return "chunk_size: " + str(info.chunk_size) + " is outside [1, 2^24]";
  const std::pair<const char*, int64_t> dims[] = {
      {"input_dim", info.input_dim}, {"output_dim", info.output_dim}, {"attribute_count", info.attribute_count}};
  for (const auto& [name, v] : dims)
    if (v < 0 || v > kMaxDim) return std::string(name) + ": " + str(v) + " is outside [0, 2^31)";
  if (info.expert_dims.empty()) return "expert_dims: empty (a μMoE layer has at least one expert mode)";
  for (std::size_t m = 0; m < info.expert_dims.size(); ++m)
    if (info.expert_dims[m] < 1 || info.expert_dims[m] > kMaxDim)
      return "expert_dims[" + str(static_cast<int64_t>(m)) + "]: " + str(info.expert_dims[m]) +
             " is outside [1, 2^31)";
  return "";
}

int64_t expected_first_sample(const RunInfo& info, int64_t index) { return index * info.chunk_size; }

int64_t expected_count(const RunInfo& info, int64_t index) {
  return std::min(info.chunk_size, info.sample_count - expected_first_sample(info, index));
}

std::string chunk_problem(const RunInfo& info, const ChunkRecord& c) {
  const int64_t chunks = info.chunk_count();
  if (c.chunk_index < 0 || c.chunk_index >= chunks)
    return "chunk_index: " + str(c.chunk_index) + " is outside [0, " + str(chunks) + ")";
  if (c.first_sample != expected_first_sample(info, c.chunk_index))
    return "first_sample: " + str(c.first_sample) + ", expected " + str(expected_first_sample(info, c.chunk_index)) +
           " (chunk_index × chunk_size)";
  const int64_t n = expected_count(info, c.chunk_index);
  if (c.count != n) return "count: " + str(c.count) + ", expected " + str(n);
  if (auto p = size_problem("labels", c.labels.size(), n, "count"); !p.empty()) return p;
  if (auto p = size_problem("predictions", c.predictions.size(), n, "count"); !p.empty()) return p;
  if (auto p = size_problem("scores", c.scores.size(), n * info.output_dim, "count × output_dim"); !p.empty()) return p;
  // Extraction never stores a score that is not finite (it reports the model instead), and the
  // ablation decides ties from the stored scores: such a score is damage.
  for (std::size_t k = 0; k < c.scores.size(); ++k)
    if (!std::isfinite(c.scores[k]))
      return "scores: value " + str(static_cast<int64_t>(k)) + " is not finite";
  // No inputs at all is a chunk whose inputs are its data set's features (ChunkRecord::inputs).
  if (!c.inputs.empty())
    if (auto p = size_problem("inputs", c.inputs.size(), n * info.input_dim, "count × input_dim"); !p.empty()) return p;
  if (auto p = size_problem("attributes", c.attributes.size(), n * info.attribute_count, "count × attribute_count");
      !p.empty())
    return p;
  for (std::size_t k = 0; k < c.attributes.size(); ++k)
    if (c.attributes[k] > 1)
      return "attributes: byte " + str(static_cast<int64_t>(k)) + " is " + str(c.attributes[k]) + ", expected 0 or 1";
  if (c.coefficients.size() != info.expert_dims.size())
    return size_problem("coefficients", c.coefficients.size(), static_cast<int64_t>(info.expert_dims.size()),
                        "one per expert mode");
  if (!c.left_to_model.empty() && c.left_to_model.size() != info.expert_dims.size())
    return size_problem("left_to_model", c.left_to_model.size(), static_cast<int64_t>(info.expert_dims.size()),
                        "none, or one per expert mode");
  for (std::size_t m = 0; m < c.coefficients.size(); ++m) {
    const bool left = !c.left_to_model.empty() && c.left_to_model[m] != 0;
    if (auto p = left ? left_mode_problem(c.coefficients[m], n, info.expert_dims[m])
                      : rows_problem(c.coefficients[m], n, info.expert_dims[m]);
        !p.empty())
      return "coefficients[" + str(static_cast<int64_t>(m)) + "]." + p;
  }
  return "";
}

CoefficientBlobs encode_coefficients(const std::vector<SparseRows>& modes, const std::vector<int64_t>& expert_dims,
                                     const std::vector<uint64_t>& left_to_model) {
  CoefficientBlobs out;
  out.left_to_model = left_to_model;
  const bool floats =
      std::all_of(modes.begin(), modes.end(), [](const SparseRows& rows) { return all_floats(rows.values); });
  for (std::size_t m = 0; m < modes.size(); ++m) {
    const SparseRows& rows = modes[m];
    out.offsets.insert(out.offsets.end(), rows.offsets.begin(), rows.offsets.end());
    if (!left_to_model.empty() && left_to_model[m] != 0) continue;  // offsets only
    const auto count = static_cast<int64_t>(rows.offsets.size()) - 1;
    // Valid rows (put_chunk checks them first) are increasing and in range, so a mode with
    // count × N_e entries holds 0 … N_e − 1 in every row.
    const bool full = static_cast<int64_t>(rows.indices.size()) == count * expert_dims.at(m);
    if (!full) out.indices.insert(out.indices.end(), rows.indices.begin(), rows.indices.end());
    if (floats) {
      const auto at = out.narrow_values.size();  // exact: each value is a float
      out.narrow_values.resize(at + rows.values.size());
      std::transform(rows.values.begin(), rows.values.end(), out.narrow_values.begin() + static_cast<std::ptrdiff_t>(at),
                     [](double v) { return static_cast<float>(v); });
    } else
      out.values.insert(out.values.end(), rows.values.begin(), rows.values.end());
  }
  return out;
}

ChunkRecord decode_chunk(const RunInfo& info, int64_t chunk_index, const StoredChunk& s) {
  ChunkRecord c;
  c.chunk_index = chunk_index;
  c.first_sample = s.first_sample;
  c.count = s.count;
  // The counts come from the run, not from the row, so a damaged row cannot ask for huge arrays.
  if (chunk_index < 0 || chunk_index >= info.chunk_count())
    throw ChunkFormatError("chunk_index: outside [0, " + str(info.chunk_count()) + ")");
  const int64_t n = expected_count(info, chunk_index);
  if (s.count != n) throw ChunkFormatError("count: " + str(s.count) + ", expected " + str(n));
  c.labels = decode_array<int64_t>(s.labels, n, "labels");
  c.predictions = decode_array<int64_t>(s.predictions, n, "predictions");
  c.scores = decode_array<double>(s.scores, n * info.output_dim, "scores");
  if (s.inputs.size > 0) c.inputs = decode_array<float>(s.inputs, n * info.input_dim, "inputs");  // else the data's
  c.attributes = decode_array<uint8_t>(s.attributes, n * info.attribute_count, "attributes");

  // The modes left to the model and the offsets first: they say how many entries each mode
  // stores, and so which form the indices and values blobs are in (chunk_codec.h).
  const auto modes = static_cast<int64_t>(info.expert_dims.size());
  if (s.coef_left_to_model.size > 0)
    c.left_to_model = decode_array<uint64_t>(s.coef_left_to_model, modes, "coef_left_to_model");
  const auto left = [&](int64_t m) { return !c.left_to_model.empty() && c.left_to_model[m] != 0; };
  const auto offsets = decode_array<int64_t>(s.coef_offsets, modes * (n + 1), "coef_offsets");
  std::vector<int64_t> nnz(static_cast<std::size_t>(modes));
  std::vector<bool> full(static_cast<std::size_t>(modes));
  int64_t total = 0, stored_indices = 0;
  for (int64_t m = 0; m < modes; ++m) {
    const std::vector<int64_t> mode_offsets(offsets.begin() + m * (n + 1), offsets.begin() + (m + 1) * (n + 1));
    if (auto p = offsets_problem(mode_offsets); !p.empty())
      throw ChunkFormatError("coefficients[" + str(m) + "]." + p);
    nnz[m] = mode_offsets.back();
    // Bounded before summing (offsets_problem allows any non-decreasing values).
    if (nnz[m] > n * info.expert_dims[m])
      throw ChunkFormatError("coefficients[" + str(m) + "].offsets: end at " + str(nnz[m]) + ", more than count × " +
                             str(info.expert_dims[m]) + " experts");
    full[m] = nnz[m] == n * info.expert_dims[m];
    if (left(m)) continue;  // stores no entries (chunk_problem checks its offsets below)
    total += nnz[m];
    if (!full[m]) stored_indices += nnz[m];
  }
  const auto index_bytes = static_cast<int64_t>(s.coef_indices.size);
  const auto value_bytes = static_cast<int64_t>(s.coef_values.size);
  if (index_bytes != total * 4 && index_bytes != stored_indices * 4)
    throw ChunkFormatError("coef_indices: " + str(index_bytes) + " bytes, expected " + str(total) + " × 4 = " +
                           str(total * 4) +
                           (stored_indices < total ? " (or " + str(stored_indices * 4) + " without the full modes')"
                                                   : std::string()));
  if (value_bytes != total * 8 && value_bytes != total * 4)
    throw ChunkFormatError("coef_values: " + str(value_bytes) + " bytes, expected " + str(total) + " × 8 = " +
                           str(total * 8) + " or × 4 = " + str(total * 4));
  const bool implied = index_bytes != total * 4;
  const auto indices = decode_array<int32_t>(s.coef_indices, implied ? stored_indices : total, "coef_indices");
  std::vector<double> values;
  if (total > 0 && value_bytes == total * 4) {
    const auto narrow = decode_array<float>(s.coef_values, total, "coef_values");
    values.assign(narrow.begin(), narrow.end());  // float → double is exact
  } else {
    values = decode_array<double>(s.coef_values, total, "coef_values");
  }

  int64_t used_indices = 0, used_values = 0;
  for (int64_t m = 0; m < modes; ++m) {
    SparseRows rows;
    rows.offsets.assign(offsets.begin() + m * (n + 1), offsets.begin() + (m + 1) * (n + 1));
    if (left(m)) {
      c.coefficients.push_back(std::move(rows));
      continue;
    }
    if (implied && full[m]) {
      const auto experts = static_cast<int32_t>(info.expert_dims[m]);
      rows.indices.resize(static_cast<std::size_t>(nnz[m]));
      for (int64_t row = 0; row < n; ++row)
        std::iota(rows.indices.begin() + row * experts, rows.indices.begin() + (row + 1) * experts, 0);
    } else {
      rows.indices.assign(indices.begin() + used_indices, indices.begin() + used_indices + nnz[m]);
      used_indices += nnz[m];
    }
    rows.values.assign(values.begin() + used_values, values.begin() + used_values + nnz[m]);
    used_values += nnz[m];
    c.coefficients.push_back(std::move(rows));
  }
  // Implied indices still go through chunk_problem with the offsets (each row of a full mode
  // must then hold exactly N_e entries).
  if (auto p = chunk_problem(info, c); !p.empty()) throw ChunkFormatError(p);
  return c;
}

std::string format_dims(const std::vector<int64_t>& dims) {
  std::string out = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) out += (i ? "," : "") + str(dims[i]);
  return out + "]";
}

std::optional<std::vector<int64_t>> parse_dims(const std::string& text) {
  if (text.size() < 2 || text.front() != '[' || text.back() != ']') return std::nullopt;
  std::vector<int64_t> dims;
  const std::string body = text.substr(1, text.size() - 2);
  if (body.empty()) return dims;
  std::size_t pos = 0;
  while (true) {
    std::size_t comma = body.find(',', pos);
    std::string item = body.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (item.empty() || item.size() > 18 || item.find_first_not_of("0123456789") != std::string::npos)
      return std::nullopt;
    dims.push_back(std::stoll(item));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return dims;
}

}  // namespace mumoe::cache
