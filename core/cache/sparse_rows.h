// Dense coefficient rows → the cache's CSR form (SparseRows), plain C++: what every extraction
// does to each chunk's gate outputs before storing them (analysis/tensor_records.h wraps it for
// tensors). Kept with the cache, beside the codec, because it is built the same way: loops over
// every coefficient that the compiler vectorises (CMakeLists.txt).
#pragma once

#include <cstdint>

#include "cache/analysis_cache.h"

namespace mumoe::cache {

/// The entries > 0 of `rows` dense rows of `experts` values each (row-major), as CSR; zeros,
/// negatives and NaN are left out (the comparison a > 0). Float values are widened exactly.
SparseRows sparse_rows_from_dense(const float* a, int64_t rows, int64_t experts);
SparseRows sparse_rows_from_dense(const double* a, int64_t rows, int64_t experts);

/// Whether `count` > 0 values are all > 0 (a dense gate's coefficients; NaN is not). Stops after
/// the first block of values that holds one that is not (a sparse gate's first row does).
bool all_positive(const float* a, int64_t count);
bool all_positive(const double* a, int64_t count);

}  // namespace mumoe::cache
