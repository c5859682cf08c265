#include "analysis/tensor_records.h"

#include <torch/torch.h>

#include <cmath>

#include "analysis/content_hash.h"
#include "cache/sparse_rows.h"

namespace mumoe::analysis {
namespace {

template <typename T>
std::vector<T> to_vector(const torch::Tensor& t) {
  const auto c = t.contiguous();
  return std::vector<T>(c.data_ptr<T>(), c.data_ptr<T>() + c.numel());
}

// Whether a [n, N] float or double tensor is non-empty with every entry > 0 (a dense gate's);
// a sparse gate's first zero ends the scan (cache/sparse_rows.h).
bool all_positive(const torch::Tensor& values) {
  if (values.scalar_type() == torch::kFloat32) return cache::all_positive(values.data_ptr<float>(), values.numel());
  if (values.scalar_type() == torch::kFloat64) return cache::all_positive(values.data_ptr<double>(), values.numel());
  return false;  // another dtype: stored as to_sparse_rows converts it
}

}  // namespace

cache::SparseRows to_sparse_rows(const torch::Tensor& coefficients) {
  TORCH_CHECK(coefficients.dim() == 2, "to_sparse_rows: expected [n, N] coefficients");
  const bool is_double = coefficients.scalar_type() == torch::kFloat64;
  const auto a = coefficients.to(torch::kCPU, is_double ? torch::kFloat64 : torch::kFloat32).contiguous();
  const int64_t n = a.size(0), experts = a.size(1);
  return is_double ? cache::sparse_rows_from_dense(a.data_ptr<double>(), n, experts)
                   : cache::sparse_rows_from_dense(a.data_ptr<float>(), n, experts);
}

torch::Tensor dense_rows(const cache::SparseRows& rows, const torch::Tensor& samples, int64_t experts) {
  const int64_t b = samples.size(0);
  auto dense = torch::zeros({b, experts}, torch::kFloat64);
  if (b == 0) return dense;
  const auto offsets = torch::from_blob(const_cast<int64_t*>(rows.offsets.data()),
                                        {static_cast<int64_t>(rows.offsets.size())}, torch::kLong);
  const auto starts = offsets.index_select(0, samples);
  const auto lengths = offsets.index_select(0, samples + 1) - starts;
  const int64_t total = lengths.sum().item<int64_t>();
  if (total == 0) return dense;
  // Position of every stored entry of the selected rows: start of its row + its rank in the row.
  const auto row_of_entry = torch::repeat_interleave(torch::arange(b), lengths);
  const auto row_begin_in_flat = (lengths.cumsum(0) - lengths).index_select(0, row_of_entry);
  const auto positions = starts.index_select(0, row_of_entry) + (torch::arange(total) - row_begin_in_flat);
  const auto indices = torch::from_blob(const_cast<int32_t*>(rows.indices.data()),
                                        {static_cast<int64_t>(rows.indices.size())}, torch::kInt)
                           .index_select(0, positions)
                           .to(torch::kLong);
  const auto values = torch::from_blob(const_cast<double*>(rows.values.data()),
                                       {static_cast<int64_t>(rows.values.size())}, torch::kFloat64)
                          .index_select(0, positions);
  dense.index_put_({row_of_entry, indices}, values);
  return dense;
}

cache::ChunkRecord make_chunk_record(int64_t chunk_index, int64_t first_sample, const torch::Tensor& inputs,
                                     const torch::Tensor& labels, const torch::Tensor& scores,
                                     const std::vector<torch::Tensor>& coefficients,
                                     const torch::Tensor& attributes, const std::vector<uint64_t>& left_to_model) {
  TORCH_CHECK(left_to_model.empty() || left_to_model.size() == coefficients.size(),
              "make_chunk_record: one checksum per expert mode");
  cache::ChunkRecord r;
  r.chunk_index = chunk_index;
  r.first_sample = first_sample;
  r.count = labels.size(0);
  r.labels = to_vector<int64_t>(labels.to(torch::kLong));
  r.scores = to_vector<double>(scores.to(torch::kFloat64));
  TORCH_CHECK(scores.dim() == 2 && scores.size(0) == r.count, "make_chunk_record: scores must be [count, classes]");
  // Each row's argmax as torch::argmax gives it (the first of equal maxima; a NaN counts as the
  // largest), in a plain loop: the op cost more than the scan of a small head's chunk.
  const int64_t classes = scores.size(1);
  r.predictions.resize(static_cast<size_t>(r.count));
  for (int64_t b = 0; b < r.count && classes > 0; ++b) {
    const double* row = r.scores.data() + b * classes;
    int64_t best = 0;
    for (int64_t o = 1; o < classes && !std::isnan(row[best]); ++o)
      if (row[o] > row[best] || std::isnan(row[o])) best = o;
    r.predictions[static_cast<size_t>(b)] = best;
  }
  if (inputs.defined()) r.inputs = to_vector<float>(inputs.to(torch::kFloat32));
  if (attributes.defined()) r.attributes = to_vector<uint8_t>(attributes.to(torch::kUInt8));
  r.left_to_model = left_to_model;
  if (!r.leaves_modes_to_model()) r.left_to_model.clear();  // every mode stored: no entries, as before
  for (size_t m = 0; m < coefficients.size(); ++m) {
    const auto& a = coefficients[m];
    if (!r.left_to_model.empty() && r.left_to_model[m])
      r.coefficients.push_back(full_rows_offsets_only(a.size(0), a.size(1)));
    else
      r.coefficients.push_back(to_sparse_rows(a));
  }
  return r;
}

std::vector<uint64_t> dense_mode_checksums(const std::vector<torch::Tensor>& coefficients) {
  std::vector<uint64_t> checksums;
  for (const auto& a : coefficients) {
    const auto values = a.cpu().contiguous();
    checksums.push_back(all_positive(values) ? values_checksum(values) : 0);
  }
  return checksums;
}

cache::SparseRows full_rows_offsets_only(int64_t rows, int64_t experts) {
  cache::SparseRows out;
  out.offsets.resize(static_cast<size_t>(rows) + 1);
  for (int64_t i = 0; i <= rows; ++i) out.offsets[static_cast<size_t>(i)] = i * experts;
  return out;
}

torch::Tensor to_tensor(const std::vector<float>& v, std::vector<int64_t> shape) {
  return torch::from_blob(const_cast<float*>(v.data()), shape, torch::kFloat32).clone();
}
torch::Tensor to_tensor(const std::vector<double>& v, std::vector<int64_t> shape) {
  return torch::from_blob(const_cast<double*>(v.data()), shape, torch::kFloat64).clone();
}
torch::Tensor to_tensor(const std::vector<int64_t>& v) {
  return torch::from_blob(const_cast<int64_t*>(v.data()), {static_cast<int64_t>(v.size())}, torch::kLong).clone();
}

}  // namespace mumoe::analysis
