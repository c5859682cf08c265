// cache::sparse_rows_from_dense against a brute-force loop written out here: rows that are full,
// empty, or mixed (zeros, negatives, NaN, ∞), for float and double input, with row lengths that
// are and are not multiples of any vector width.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "cache/sparse_rows.h"

namespace {

using mumoe::cache::SparseRows;

template <typename T>
SparseRows brute_force(const std::vector<T>& a, int64_t rows, int64_t experts) {
  SparseRows out;
  out.offsets.push_back(0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < experts; ++c) {
      const T v = a[static_cast<size_t>(r * experts + c)];
      if (v > 0) {
        out.indices.push_back(static_cast<int32_t>(c));
        out.values.push_back(static_cast<double>(v));
      }
    }
    out.offsets.push_back(static_cast<int64_t>(out.indices.size()));
  }
  return out;
}

template <typename T>
void expect_matches_brute_force(int64_t rows, int64_t experts, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::vector<T> a(static_cast<size_t>(rows * experts));
  for (int64_t r = 0; r < rows; ++r) {
    const int kind = static_cast<int>(r % 4);  // full, empty, mixed, mixed with NaN and ∞
    for (int64_t c = 0; c < experts; ++c) {
      T v = static_cast<T>(uniform(rng) + 1e-3);
      if (kind == 1) v = 0;
      if (kind >= 2 && uniform(rng) < 0.4) v = uniform(rng) < 0.5 ? T(0) : static_cast<T>(-v);
      if (kind == 3 && c % 5 == 1) v = std::numeric_limits<T>::quiet_NaN();
      if (kind == 3 && c % 7 == 2) v = std::numeric_limits<T>::infinity();
      a[static_cast<size_t>(r * experts + c)] = v;
    }
  }
  const SparseRows got = mumoe::cache::sparse_rows_from_dense(a.data(), rows, experts);
  const SparseRows want = brute_force(a, rows, experts);
  EXPECT_EQ(got.offsets, want.offsets) << rows << " × " << experts;
  EXPECT_EQ(got.indices, want.indices) << rows << " × " << experts;
  EXPECT_EQ(got.values, want.values) << rows << " × " << experts;  // widening is exact: equal bits
}

TEST(SparseRowsFromDense, MatchesABruteForceLoopForFloats) {
  for (const int64_t experts : {1, 3, 8, 17, 128})
    for (const int64_t rows : {0, 1, 9}) expect_matches_brute_force<float>(rows, experts, 7u * experts + rows);
}

TEST(SparseRowsFromDense, MatchesABruteForceLoopForDoubles) {
  for (const int64_t experts : {1, 5, 16, 33})
    for (const int64_t rows : {1, 8}) expect_matches_brute_force<double>(rows, experts, 11u * experts + rows);
}

}  // namespace
