#include "zaya/ops/cca_conv_bf16.h"

#include <omp.h>

#include <cstring>

#include "zaya/core/arena.h"
#include "zaya/core/bf16.h"
#include "zaya/core/error.h"
#include "zaya/ops/matmul_bf16.h"
#include "zaya/ops/parallel_for.h"

namespace zaya {
namespace {

using ConvScratch = ConvBf16Scratch;

// out[((g * B + b) * rows + r) * d + i] = bf16(x[(b * rows + r) * C + g * d + i]).
void regroup_bf16(uint16_t* out, const float* x, int64_t B, int64_t rows, int64_t G, int64_t d) {
  const int64_t C = G * d;
  parallel_for_2d(B, rows, B * rows * C, [&](int64_t b, int64_t r) {
    const float* src = x + (b * rows + r) * C;
    for (int64_t g = 0; g < G; ++g) {
      uint16_t* dst = out + ((g * B + b) * rows + r) * d;
#pragma omp simd
      for (int64_t i = 0; i < d; ++i) dst[i] = float_to_bf16(src[g * d + i]);
    }
  });
}

// x[(b * x_rows + t + x_shift) * G * d + g * d + j] += y[((g * B + b) * y_rows + t + y_shift) * d + j]
// for the S rows t of every sequence: a product in [G, B, rows, d] added back
// into a [B, rows, C] buffer, shifted by its tap.
void add_regrouped(float* x, int64_t x_rows, int64_t x_shift, const float* y, int64_t y_rows, int64_t y_shift,
                   int64_t B, int64_t S, int64_t G, int64_t d) {
  const int64_t C = G * d;
  parallel_for_2d(B, S, B * S * C, [&](int64_t b, int64_t t) {
    float* dst = x + (b * x_rows + t + x_shift) * C;
    for (int64_t g = 0; g < G; ++g) {
      const float* src = y + ((g * B + b) * y_rows + t + y_shift) * d;
#pragma omp simd
      for (int64_t j = 0; j < d; ++j) dst[g * d + j] += src[j];
    }
  });
}

BatchedMatrix dense(int64_t groups, int64_t rows, int64_t cols) {
  return {{1, 1, groups, rows, cols}, {groups * rows * cols, groups * rows * cols, rows * cols, cols, 1}};
}

// A group's d x d tap read transposed (W^T: [d_in, d_out]).
BatchedMatrix taps_transposed(int64_t G, int64_t d) { return {{1, 1, G, d, d}, {G * d * d, G * d * d, d * d, 1, d}}; }

}  // namespace

void reserve_cca_conv_bf16_scratch(const CcaConvShape& sh) {
  const int64_t B = sh.batch, C = sh.channels, P = sh.a_rows();
  ConvScratch& s = sh.bf16->conv;
  s.taps.get(sh.taps_b * C * sh.head_dim);
  s.grouped.get(B * P * C);
  s.gradient.get(B * sh.seq * C);
  s.shifted.get(B * sh.seq * C);
  s.product.get(B * P * C);
}

void cca_conv_b_forward_bf16(float* c_BSC, const float* a_BUC, const float* w_tap, const float* bB,
                             const CcaConvShape& sh) {
  ZAYA_ASSERT(sh.bf16 != nullptr && !omp_in_parallel());
  const int64_t B = sh.batch, S = sh.seq, C = sh.channels, d = sh.head_dim, P = sh.a_rows(), G = sh.groups();
  const int64_t k1 = sh.taps_b;
  ConvScratch& s = sh.bf16->conv;
  uint16_t* taps = s.taps.get(k1 * C * d);
  uint16_t* a = s.grouped.get(B * P * C);
  float* y = s.product.get(B * P * C);
  convert_to_bf16(taps, w_tap, k1 * C * d);
  regroup_bf16(a, a_BUC, B, P, G, d);
  parallel_for(B * S, B * S * C, [&](int64_t r) { std::memcpy(c_BSC + r * C, bB, sizeof(float) * size_t(C)); });
  for (int64_t m = 0; m < k1; ++m) {
    // Y_m = a_g W_m^T over all B x P rows of each group; output row t takes Y_m's row t + m.
    matmul_bf16_batched(sh.bf16->gemms, dense(G, B * P, d), a, taps_transposed(G, d), taps + m * C * d,
                        dense(G, B * P, d), y);
    add_regrouped(c_BSC, S, 0, y, P, m, B, S, G, d);
  }
}

void cca_conv_b_backward_bf16(float* da_BUC, float* dw_tap, const float* dc_BSC, const float* a_BUC, const float* w_tap,
                              const CcaConvShape& sh) {
  ZAYA_ASSERT(sh.bf16 != nullptr && !omp_in_parallel());
  const int64_t B = sh.batch, S = sh.seq, C = sh.channels, d = sh.head_dim, P = sh.a_rows(), G = sh.groups();
  const int64_t k1 = sh.taps_b;
  ConvScratch& s = sh.bf16->conv;
  uint16_t* taps = s.taps.get(k1 * C * d);
  uint16_t* a = s.grouped.get(B * P * C);
  uint16_t* a_m = s.shifted.get(B * S * C);
  uint16_t* dc = s.gradient.get(B * S * C);
  float* z = s.product.get(B * P * C);
  convert_to_bf16(taps, w_tap, k1 * C * d);
  regroup_bf16(a, a_BUC, B, P, G, d);
  regroup_bf16(dc, dc_BSC, B, S, G, d);
  for (int64_t m = 0; m < k1; ++m) {
    // dW_m = dc_g^T a_g[m .. m + S - 1], the rows of every sequence stacked (one sum of B x S terms).
    parallel_for_2d(G, B, G * B * S * d, [&](int64_t g, int64_t b) {
      std::memcpy(a_m + (g * B + b) * S * d, a + ((g * B + b) * P + m) * d, sizeof(uint16_t) * size_t(S * d));
    });
    const BatchedMatrix dc_t{{1, 1, G, d, B * S}, {G * B * S * d, G * B * S * d, B * S * d, 1, d}};
    matmul_bf16_batched(sh.bf16->gemms, dc_t, dc, dense(G, B * S, d), a_m, dense(G, d, d), dw_tap + m * C * d);
    // Z_m = dc_g W_m; conv A row t + m of each sequence takes Z_m's row t.
    matmul_bf16_batched(sh.bf16->gemms, dense(G, B * S, d), dc, dense(G, d, d), taps + m * C * d, dense(G, B * S, d),
                        z);
    add_regrouped(da_BUC, P, m, z, S, 0, B, S, G, d);
  }
}

}  // namespace zaya
