#include "zaya/ops/bf16_linear.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "zaya/core/arena.h"
#include "zaya/core/bf16.h"
#include "zaya/core/error.h"
#include "zaya/ops/matmul_bf16.h"
#include "zaya/ops/parallel_for.h"

namespace zaya {
namespace {

int64_t padded_rows(int64_t n) { return (n + kBf16RowBucket - 1) / kBf16RowBucket * kBf16RowBucket; }

// dst[padded_rows(rows), cols] = bf16(src rows), zero rows after `rows`.
void to_bf16_rows(uint16_t* dst, const float* src, int64_t rows, int64_t cols) {
  const int64_t padded = padded_rows(rows);
  parallel_for(padded, padded * cols, [&](int64_t r) {
    uint16_t* d = dst + r * cols;
    if (r < rows) {
      const float* s = src + r * cols;
#pragma omp simd
      for (int64_t i = 0; i < cols; ++i) d[i] = float_to_bf16(s[i]);
    } else {
      std::memset(d, 0, sizeof(uint16_t) * cols);
    }
  });
}

// The largest bucket multiple 32 x 2^k <= n (n >= kBf16RowBucket): row counts
// are cut into such pieces, largest first, so a weight shape sees at most
// log2(rows / 32) + 1 GEMM shapes whatever the routing does.
int64_t piece(int64_t n) {
  int64_t p = kBf16RowBucket;
  while (2 * p <= n) p *= 2;
  return p;
}

// C[rows, N] (+)= A[rows, K] op(B) for A bf16 with padded_rows(rows) rows (zero
// padding): the rows in whole buckets straight into C, the rest through a
// staged block of one bucket.
void gemm_rows(Bf16Context& ctx, int64_t rows, int64_t N, int64_t K, const uint16_t* A, const uint16_t* B, bool trans_b,
               float* C, bool accumulate) {
  const int64_t whole = rows / kBf16RowBucket * kBf16RowBucket, rest = rows - whole;
  const int64_t ldb = trans_b ? K : N;
  for (int64_t r0 = 0; r0 < whole;) {
    const int64_t m = piece(whole - r0);
    gemm_bf16(ctx.gemms, false, trans_b, m, N, K, A + r0 * K, K, B, ldb, C + r0 * N, N, accumulate);
    r0 += m;
  }
  if (rest == 0) return;
  float* tail = ctx.linear.tail.get(kBf16RowBucket * N);
  gemm_bf16(ctx.gemms, false, trans_b, kBf16RowBucket, N, K, A + whole * K, K, B, ldb, tail, N, false);
  float* c = C + whole * N;
  for (int64_t r = 0; r < rest; ++r) {
    float* dst = c + r * N;
    const float* src = tail + r * N;
    if (accumulate) {
#pragma omp simd
      for (int64_t j = 0; j < N; ++j) dst[j] += src[j];
    } else {
      std::memcpy(dst, src, sizeof(float) * N);
    }
  }
}

// dx[T,I] += dy[T,O] w[O,I] and dw[O,I] += dy^T[O,T] x[T,I] (either may be
// null) from rounded operands with zero padding; the weight gradient's
// reduction runs over the padded rows in pieces, in order.
void backward_both_rounded(Bf16Context& ctx, float* dx_TI, float* dw_OI, const uint16_t* dyb, const uint16_t* xb,
                           const uint16_t* w_OI, int64_t tokens, int64_t in, int64_t out) {
  if (dx_TI != nullptr) gemm_rows(ctx, tokens, in, out, dyb, w_OI, false, dx_TI, true);
  if (dw_OI == nullptr) return;
  const int64_t padded = padded_rows(tokens);
  for (int64_t r0 = 0; r0 < padded;) {
    const int64_t k = piece(padded - r0);
    gemm_bf16(ctx.gemms, true, false, out, in, k, dyb + r0 * out, out, xb + r0 * in, in, dw_OI, in, true);
    r0 += k;
  }
}

}  // namespace

void reserve_bf16_linear_scratch(Bf16Context& ctx, int64_t a_elements, int64_t b_elements, int64_t width) {
  LinearBf16Scratch& s = ctx.linear;
  s.a.get(a_elements);
  s.b.get(b_elements);
  s.tail.get(kBf16RowBucket * width);
}

void linear_forward_bf16(Bf16Context& ctx, float* y_TO, const float* x_TI, const uint16_t* w_OI, int64_t tokens,
                         int64_t in, int64_t out, bool accumulate) {
  if (tokens == 0) return;
  linear_forward_bf16_keep(ctx, y_TO, x_TI, ctx.linear.a.get(padded_rows(tokens) * in), w_OI, tokens, in, out,
                           accumulate);
}

void linear_forward_bf16_keep(Bf16Context& ctx, float* y_TO, const float* x_TI, uint16_t* xb_TI, const uint16_t* w_OI,
                              int64_t tokens, int64_t in, int64_t out, bool accumulate) {
  if (tokens == 0) return;
  ZAYA_ASSERT(!omp_in_parallel());
  to_bf16_rows(xb_TI, x_TI, tokens, in);
  gemm_rows(ctx, tokens, out, in, xb_TI, w_OI, true, y_TO, accumulate);
}

void linear_backward_bf16(Bf16Context& ctx, float* dx_TI, float* dw_OI, const float* dy_TO, const float* x_TI,
                          const uint16_t* w_OI, int64_t tokens, int64_t in, int64_t out) {
  if (tokens == 0) return;
  ZAYA_ASSERT(!omp_in_parallel());
  uint16_t* dyb = ctx.linear.a.get(padded_rows(tokens) * out);
  to_bf16_rows(dyb, dy_TO, tokens, out);
  linear_backward_bf16_rounded(ctx, dx_TI, dw_OI, dyb, x_TI, w_OI, tokens, in, out);
}

uint16_t* bf16_dy_scratch(Bf16Context& ctx, int64_t tokens, int64_t out) {
  uint16_t* dyb = ctx.linear.a.get(padded_rows(tokens) * out);
  std::memset(dyb + tokens * out, 0, sizeof(uint16_t) * (padded_rows(tokens) - tokens) * out);
  return dyb;
}

void linear_backward_bf16_rounded(Bf16Context& ctx, float* dx_TI, float* dw_OI, const uint16_t* dyb, const float* x_TI,
                                  const uint16_t* w_OI, int64_t tokens, int64_t in, int64_t out) {
  if (tokens == 0) return;
  ZAYA_ASSERT(!omp_in_parallel());
  uint16_t* xb = nullptr;
  if (dw_OI != nullptr) {
    xb = ctx.linear.b.get(padded_rows(tokens) * in);
    to_bf16_rows(xb, x_TI, tokens, in);
  }
  backward_both_rounded(ctx, dx_TI, dw_OI, dyb, xb, w_OI, tokens, in, out);
}

int64_t bf16_padded_rows(int64_t tokens) { return padded_rows(tokens); }

void linear_backward_bf16_kept(Bf16Context& ctx, float* dx_TI, float* dw_OI, const float* dy_TO, const uint16_t* xb_TI,
                               const uint16_t* w_OI, int64_t tokens, int64_t in, int64_t out) {
  if (tokens == 0) return;
  ZAYA_ASSERT(!omp_in_parallel());
  uint16_t* dyb = ctx.linear.a.get(padded_rows(tokens) * out);
  to_bf16_rows(dyb, dy_TO, tokens, out);
  backward_both_rounded(ctx, dx_TI, dw_OI, dyb, xb_TI, w_OI, tokens, in, out);
}

}  // namespace zaya
