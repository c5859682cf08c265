// How runs and chunks are checked and stored: the validation put_chunk and get_chunk share, and
// the blob layout of a chunk row. Private to the cache (not part of its API).
//
// Blob layout of a chunk (every array raw little-endian, as in memory on the machines we run on):
//   labels, predictions  int64[count]
//   scores               float64[count × output_dim]
//   inputs               float32[count × input_dim], or nothing: the layer's inputs are the data
//                        set's own features, which the loader supplies (a head without backbone)
//   attributes           uint8[count × attribute_count]
//   coef_offsets         int64[modes × (count + 1)]: each mode's CSR offsets, mode after mode
//   coef_indices         int32[Σ nnz]: each mode's indices, mode after mode — except (schema 3)
//                        that a mode whose every row holds all N_e experts stores none (they
//                        are 0 … N_e − 1 in each row): a softmax gate's coefficients
//   coef_values          float64[Σ nnz], or (schema 3) float32[Σ nnz] when every value of the
//                        chunk is a float — the model's float32 gates — widened exactly on reading
//   coef_left_to_model   (schema 4) nothing, or uint64[modes]: ChunkRecord::left_to_model. A mode
//                        with a non-zero entry has offsets N_e, 2 N_e, … and no indices or values
//                        in the two blobs above (its entries count in neither Σ below)
// A mode's nnz is the last of its offsets (Σ nnz: over the modes not left to the model, which
// the last blob, read first, names), so the three coefficient blobs split without any
// further length fields, and the blobs' sizes say which of the forms above a chunk uses: the
// indices hold either Σ nnz entries or the entries of the stored modes that are not full (a
// full mode has count × N_e ≥ 1 entries, so the two sizes differ whenever a stored mode is
// full), the values either 8 or 4 bytes per entry. Schema-2 chunks are the first forms throughout and read as
// they always did. (So a blob cut to exactly the other form's size is read in that form; the
// row checks that follow — a_n > 0 and finite, indices increasing within [0, N_e) — catch most
// such damage, not all of it. A damaged chunk is only ever a cache miss: cache_repair.h.) The
// compact forms halve what a softmax head's extraction writes (most of its time, 2026-11-25).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cache/analysis_cache.h"
#include "cache/sqlite_database.h"

namespace mumoe::cache {

// A blob is the vector's memory as is, which is the little-endian layout above only here.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the cache stores raw little-endian arrays");

/// A stored chunk that does not match its run. what() is "FIELD: problem".
class ChunkFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// "" when a run with these shapes can be stored, else "FIELD: problem".
std::string run_info_problem(const RunInfo& info);

/// "" when `chunk` is chunk `chunk.chunk_index` of a run with `info` (sizes, CSR offsets, expert
/// index ranges and order, a_n > 0, attributes 0/1), else "FIELD: problem".
std::string chunk_problem(const RunInfo& info, const ChunkRecord& chunk);

/// The first sample and sample count that chunk `index` of a run must have.
int64_t expected_first_sample(const RunInfo& info, int64_t index);
int64_t expected_count(const RunInfo& info, int64_t index);

/// The bytes of a vector, to bind as a blob.
template <class T>
BlobView raw_bytes(const std::vector<T>& v) {
  return BlobView{v.data(), v.size() * sizeof(T)};
}

/// The three coefficient blobs of a chunk, in the compact forms where they apply.
struct CoefficientBlobs {
  std::vector<int64_t> offsets;
  std::vector<int32_t> indices;        ///< of the modes that are not full
  std::vector<float> narrow_values;    ///< every value, when each is a float …
  std::vector<double> values;          ///< … else every value as is
  std::vector<uint64_t> left_to_model; ///< ChunkRecord::left_to_model as is
  BlobView values_blob() const { return narrow_values.empty() ? raw_bytes(values) : raw_bytes(narrow_values); }
};
/// `modes` and `left_to_model` must be valid for `expert_dims` (chunk_problem).
CoefficientBlobs encode_coefficients(const std::vector<SparseRows>& modes, const std::vector<int64_t>& expert_dims,
                                     const std::vector<uint64_t>& left_to_model = {});

/// A chunk row as read from the database.
struct StoredChunk {
  int64_t first_sample = 0;
  int64_t count = 0;
  BlobView labels, predictions, scores, inputs, attributes, coef_offsets, coef_indices, coef_values, coef_left_to_model;
};
/// Decodes and validates a stored chunk; throws ChunkFormatError naming the field.
ChunkRecord decode_chunk(const RunInfo& info, int64_t chunk_index, const StoredChunk& stored);

/// expert_dims as stored in the runs table: a JSON list of integers, e.g. "[128,4]".
std::string format_dims(const std::vector<int64_t>& dims);
/// The inverse of format_dims; nullopt when `text` is not such a list.
std::optional<std::vector<int64_t>> parse_dims(const std::string& text);

}  // namespace mumoe::cache
