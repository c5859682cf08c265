// Conversions between torch tensors and the cache's plain records (cache::ChunkRecord,
// cache::SparseRows): the one place where the torch-free cache meets LibTorch.
#pragma once

#include <torch/types.h>

#include <vector>

#include "cache/analysis_cache.h"

namespace mumoe::analysis {

/// Dense coefficients [n, N] → CSR of the entries > 0 (the rest of a sparse entmax output is 0).
cache::SparseRows to_sparse_rows(const torch::Tensor& coefficients);

/// Dense float64 [rows.size(), experts] of the CSR rows listed in `samples` (indices into rows).
torch::Tensor dense_rows(const cache::SparseRows& rows, const torch::Tensor& samples, int64_t experts);

/// A chunk from tensors: inputs float [n, I] or undefined (not stored: the data's own features,
/// ChunkRecord::inputs), labels [n], scores [n, C] (predictions are their argmax), coefficients
/// per mode [n, N_e], attributes [n, K] or undefined. A mode with a non-zero entry in
/// `left_to_model` (from dense_mode_checksums) is left to the model: only its offsets and that
/// checksum are kept (ChunkRecord::left_to_model); the caller must be able to compute the same
/// bits again. Every other mode is stored as CSR.
cache::ChunkRecord make_chunk_record(int64_t chunk_index, int64_t first_sample, const torch::Tensor& inputs,
                                     const torch::Tensor& labels, const torch::Tensor& scores,
                                     const std::vector<torch::Tensor>& coefficients,
                                     const torch::Tensor& attributes, const std::vector<uint64_t>& left_to_model = {});

/// Per mode of a chunk's `coefficients` ([n, N_e] each): the values_checksum (content_hash.h) of
/// the tensor as given where every coefficient is > 0 (a softmax gate's), else 0. A sparse gate's
/// mode costs a scan of its first values. What make_chunk_record is given to leave modes to the
/// model (extraction does on the CPU, where the loader can recompute the same bits).
std::vector<uint64_t> dense_mode_checksums(const std::vector<torch::Tensor>& coefficients);

/// Mode m's rows when every row holds all `experts` experts: offsets 0, N_e, 2 N_e, … and
/// nothing else (what a ChunkRecord holds for a mode left to the model).
cache::SparseRows full_rows_offsets_only(int64_t rows, int64_t experts);

/// Tensor views copied from plain vectors.
torch::Tensor to_tensor(const std::vector<float>& values, std::vector<int64_t> shape);
torch::Tensor to_tensor(const std::vector<double>& values, std::vector<int64_t> shape);
torch::Tensor to_tensor(const std::vector<int64_t>& values);

}  // namespace mumoe::analysis
