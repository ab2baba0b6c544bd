#pragma once
// The sum of squares of a float array in float64, in a fixed order that does
// not depend on the thread count or the build: eight interleaved partial sums
// (element i goes to partial i mod 8), added together in index order, then
// the tail. Eight lanes let the compiler use two AVX-512 registers of
// doubles instead of one dependent add per element (about 8x fewer cycles for
// the gradient norm and Muon's normalisation); the order is part of the
// contract, since these sums decide clipping and update bits (bitwise resume).

#include <cstdint>

namespace zaya {

inline double sum_squares(const float* x, int64_t n) {
  double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) lane[j] += double(x[i + j]) * double(x[i + j]);
  double s = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  for (; i < n; ++i) s += double(x[i]) * double(x[i]);
  return s;
}

}  // namespace zaya
