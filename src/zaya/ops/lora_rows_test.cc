// The decoder's row-wise LoRA branch (ops/lora_rows.h): the formula in double
// within float rounding, only the listed rows touched (strides honoured), and
// each row's bits the same whichever other rows share the call, or none.
#include "zaya/ops/lora_rows.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "zaya/core/rng.h"

namespace zaya {
namespace {

std::vector<float> randoms(int64_t n, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = normal01(seed, 3, uint64_t(i));
  return v;
}

TEST(LoraRows, MatchesTheFormulaOnTheListedRowsOnly) {
  // in and out not multiples of the 16 summation lanes; strides wider than the widths.
  const LoraRowsShape s{.in = 37, .out = 21, .rank = 5, .ldx = 40, .ldy = 29, .scale = 1.5f};
  const int64_t T = 9;
  const std::vector<float> x = randoms(T * s.ldx, 1), a = randoms(s.rank * s.in, 2), b = randoms(s.out * s.rank, 3);
  const std::vector<float> y0 = randoms(T * s.ldy, 4);
  std::vector<float> y = y0;
  const std::vector<int32_t> rows = {0, 3, 4, 8};
  lora_rows_forward(y.data(), x.data(), rows, a.data(), b.data(), s);
  for (int64_t t = 0; t < T; ++t) {
    const bool listed = std::find(rows.begin(), rows.end(), int32_t(t)) != rows.end();
    for (int64_t o = 0; o < s.ldy; ++o) {
      double want = y0[size_t(t * s.ldy + o)];
      if (listed && o < s.out)
        for (int64_t k = 0; k < s.rank; ++k) {
          double h = 0;
          for (int64_t i = 0; i < s.in; ++i) h += double(x[size_t(t * s.ldx + i)]) * a[size_t(k * s.in + i)];
          want += double(s.scale) * h * b[size_t(o * s.rank + k)];
        }
      EXPECT_NEAR(y[size_t(t * s.ldy + o)], want, 1e-4 * (1 + std::fabs(want))) << "row " << t << " column " << o;
    }
  }
}

TEST(LoraRows, EachRowHasTheSameBitsInAnyCall) {
  // Wide enough that the call of every row runs in parallel and the call of one row does not.
  const LoraRowsShape s{.in = 300, .out = 260, .rank = 16, .ldx = 300, .ldy = 260, .scale = 0.5f};
  const int64_t T = 24;
  const std::vector<float> x = randoms(T * s.ldx, 5), a = randoms(s.rank * s.in, 6), b = randoms(s.out * s.rank, 7);
  std::vector<float> all(static_cast<size_t>(T * s.ldy), 0.0f), one(all);
  std::vector<int32_t> rows(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) rows[size_t(t)] = int32_t(t);
  lora_rows_forward(all.data(), x.data(), rows, a.data(), b.data(), s);
  for (int32_t t = int32_t(T) - 1; t >= 0; --t) lora_rows_forward(one.data(), x.data(), {&t, 1}, a.data(), b.data(), s);
  EXPECT_EQ(std::memcmp(all.data(), one.data(), sizeof(float) * all.size()), 0);
}

}  // namespace
}  // namespace zaya
