// cache::sparse_rows_from_dense against a brute-force loop written out here: rows that are full,
// empty, or mixed (zeros, negatives, NaN, ∞), for float and double input, with row lengths that
// are and are not multiples of any vector width; and cache::all_positive against the definition,
// with one value that is not > 0 at every position around its blocks' edges.
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

template <typename T>
void expect_all_positive_finds_every_non_positive_value() {
  using mumoe::cache::all_positive;
  for (const int64_t count : {1, 7, 1023, 1024, 1025, 3000}) {
    std::vector<T> a(static_cast<size_t>(count));
    for (int64_t k = 0; k < count; ++k) a[static_cast<size_t>(k)] = static_cast<T>(1e-30 + 0.5 * (k % 3));
    EXPECT_TRUE(all_positive(a.data(), count)) << count;
    for (const int64_t at : {int64_t{0}, int64_t{1}, count / 2, int64_t{1023}, int64_t{1024}, int64_t{2047},
                             int64_t{2048}, count - 1}) {
      if (at < 0 || at >= count) continue;
      for (const T bad : {T(0), T(-0.0), T(-1), std::numeric_limits<T>::quiet_NaN(), -std::numeric_limits<T>::infinity(),
                          -std::numeric_limits<T>::denorm_min()}) {
        const T kept = a[static_cast<size_t>(at)];
        a[static_cast<size_t>(at)] = bad;
        EXPECT_FALSE(all_positive(a.data(), count)) << count << " values, " << bad << " at " << at;
        a[static_cast<size_t>(at)] = kept;
      }
    }
    // +∞ and the smallest subnormal are > 0.
    a[static_cast<size_t>(count - 1)] = std::numeric_limits<T>::infinity();
    a[0] = std::numeric_limits<T>::denorm_min();
    EXPECT_TRUE(all_positive(a.data(), count)) << count;
  }
  EXPECT_FALSE(all_positive(static_cast<const T*>(nullptr), 0));  // no values: not a dense gate's
}

TEST(AllPositive, FindsEveryValueThatIsNotGreaterThanZeroInFloats) {
  expect_all_positive_finds_every_non_positive_value<float>();
}

TEST(AllPositive, FindsEveryValueThatIsNotGreaterThanZeroInDoubles) {
  expect_all_positive_finds_every_non_positive_value<double>();
}

}  // namespace
