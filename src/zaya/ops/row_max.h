#pragma once
// The largest element of a row, for the softmaxes (attention, cross-entropy,
// decoding). A running `mx = std::max(mx, x[i])` is one dependent max per
// element: the compiler does not vectorise it (std::max's NaN rule is not
// associative), and a vocabulary row of 8192 then took 4 cycles per element
// (70% of cross_entropy_forward, docs/performance.md). Here 16 running maxima
// go side by side (one vector max per 16 elements) and are combined at the end.
// The result is the one the running max gives: NaNs are skipped in both (each
// max keeps its running value when compared with a NaN), and otherwise the
// largest value is unique up to the sign of a zero maximum.

#include <algorithm>
#include <cstdint>
#include <limits>

namespace zaya {

// max(x[0, n)), ignoring NaNs; -infinity when n == 0 or every element is NaN.
template <typename T>
inline T row_max(const T* x, int64_t n) {
  constexpr int64_t kLanes = 16;
  T lanes[kLanes];
  for (int64_t l = 0; l < kLanes; ++l) lanes[l] = -std::numeric_limits<T>::infinity();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
#pragma omp simd
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] = std::max(lanes[l], x[i + l]);
  }
  T mx = -std::numeric_limits<T>::infinity();
  for (int64_t l = 0; l < kLanes; ++l) mx = std::max(mx, lanes[l]);
  for (; i < n; ++i) mx = std::max(mx, x[i]);
  return mx;
}

}  // namespace zaya
