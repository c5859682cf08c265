// Norms and the top two of one row of numbers, in float64, fast. The norms: the per-sample majorants of the float32 score
// bound (exact_layer.h, float32_score_error) read every coefficient of a dense gate — 10⁷ per
// run at 1,024 experts — and a plain `sum += |v|` loop is one long chain of dependent additions
// (GCC may not reorder floating-point sums), ~1 ns per value on this project's VMs.
// These keep 8 partial sums instead, so the result can differ from the sequential sum by
// rounding (relative ~n · 2⁻⁵³), which the bound's safety factor covers. Plain C++.
#pragma once

#include <cstdint>

namespace mumoe::analysis {

/// Σ |v_i| over n values.
double sum_of_abs(const float* v, int64_t n);
double sum_of_abs(const double* v, int64_t n);
/// Σ v_i² over n values.
double sum_of_squares(const float* v, int64_t n);

/// The two largest of n ≥ 1 values (a row of class scores): `first` at `index` (the first among
/// equal maxima, as argmax), `second` the next (equal to `first` when two share it; −∞ for n = 1).
struct TopTwo {
  double first, second;
  int64_t index;
};
TopTwo top_two(const double* v, int64_t n);

}  // namespace mumoe::analysis
