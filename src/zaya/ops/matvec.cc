#include "zaya/ops/matvec.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>
#define ZAYA_MATVEC_AVX512 1
// GCC 12's AVX-512 intrinsics fill unused mask lanes from _mm512_undefined_*(),
// which -Wuninitialized reports at every inlined call (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define ZAYA_MATVEC_AVX2 1
#endif

#include "zaya/core/bf16.h"
#include "zaya/core/error.h"
#include "zaya/core/fp8.h"
#include "zaya/core/mxfp4.h"
#include "zaya/core/q8_0.h"
#include "zaya/core/work_pool.h"
#include "zaya/ops/dot_widened.h"
#include "zaya/ops/matvec_blocks.h"
#include "zaya/ops/matvec_fp8_bf16.h"
#include "zaya/ops/matvec_lowbit.h"
#include "zaya/ops/matvec_q8.h"

namespace zaya {
namespace {

#ifdef ZAYA_MATVEC_AVX512

// 16 weights widened to float: bf16 is the top half of a float32.
inline __m512 load_w(const uint16_t* p) {
  return _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
}
inline __m512 load_w_tail(const uint16_t* p, __mmask16 m) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}
inline __m512 load_w(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load_w_tail(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }

// R weight rows x TT tokens; each weight vector is loaded once and used TT times.
template <int R, int TT, typename W>
inline void tile(const W* w, int64_t in, const float* x, int64_t ldx, float* y, int64_t ldy, bool accumulate) {
  __m512 acc[R][TT];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TT; ++t) acc[r][t] = _mm512_setzero_ps();
  // Rows are contiguous, so the next tile's R rows follow this one's: fetch
  // them one tile ahead, spread evenly over this tile's iterations. A row is
  // often only 1-4 KB, too short for the hardware prefetcher to lock on.
  constexpr int kLinesPerStep = R * 16 * int(sizeof(W)) / 64;
  const char* next = reinterpret_cast<const char*>(w + R * in);
  int64_t i = 0;
  for (; i + 16 <= in; i += 16) {
    const char* pf = next + i * R * int64_t(sizeof(W));
    for (int l = 0; l < kLinesPerStep; ++l) _mm_prefetch(pf + 64 * l, _MM_HINT_T0);
    __m512 xv[TT];
    for (int t = 0; t < TT; ++t) xv[t] = _mm512_loadu_ps(x + t * ldx + i);
    for (int r = 0; r < R; ++r) {
      const __m512 wv = load_w(w + r * in + i);
      for (int t = 0; t < TT; ++t) acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
  if (i < in) {
    const __mmask16 m = __mmask16((1u << (in - i)) - 1u);
    __m512 xv[TT];
    for (int t = 0; t < TT; ++t) xv[t] = _mm512_maskz_loadu_ps(m, x + t * ldx + i);
    for (int r = 0; r < R; ++r) {
      const __m512 wv = load_w_tail(w + r * in + i, m);
      for (int t = 0; t < TT; ++t) acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TT; ++t) {
      const float s = _mm512_reduce_add_ps(acc[r][t]);
      float* dst = y + t * ldy + r;
      *dst = accumulate ? *dst + s : s;
    }
}

// Rows [r0, r1) for a block of TT tokens.
template <int TT, typename W>
void rows_for_tokens(const W* w, int64_t in, int64_t r0, int64_t r1, const float* x, int64_t ldx, float* y, int64_t ldy,
                     bool accumulate) {
  constexpr int R = TT == 1 ? 8 : 4;
  int64_t r = r0;
  for (; r + R <= r1; r += R) tile<R, TT>(w + r * in, in, x, ldx, y + r, ldy, accumulate);
  for (; r < r1; ++r) tile<1, TT>(w + r * in, in, x, ldx, y + r, ldy, accumulate);
}

#elif defined(ZAYA_MATVEC_AVX2)

// 8 weights widened to float: bf16 is the top half of a float32.
inline __m256 load8(const uint16_t* p) {
  return _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
}
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }

// R weight rows x TT tokens. Each (row, token) keeps dot_widened's 16 lanes as
// two 8-float vectors (elements i..i+7 and i+8..i+15 of each 16) and ends in
// dot_widened_finish, so a result has the portable kernel's bits; each weight
// vector is loaded once and used TT times.
template <int R, int TT, typename W>
inline void tile(const W* w, int64_t in, const float* x, int64_t ldx, float* y, int64_t ldy, bool accumulate) {
  __m256 lo[R][TT], hi[R][TT];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TT; ++t) lo[r][t] = hi[r][t] = _mm256_setzero_ps();
  // The next tile's R rows follow this one's: fetch them one tile ahead,
  // spread over this tile's iterations (rows of 1-4 KB are too short for the
  // hardware prefetcher to lock on).
  constexpr int64_t kStepBytes = R * kDotLanes * int64_t(sizeof(W));
  const char* next = reinterpret_cast<const char*>(w + R * in);
  int64_t i = 0;
  for (; i + kDotLanes <= in; i += kDotLanes) {
    const char* pf = next + i * R * int64_t(sizeof(W));
    for (int64_t b = 0; b < kStepBytes; b += 64) _mm_prefetch(pf + b, _MM_HINT_T0);
    for (int r = 0; r < R; ++r) {
      const __m256 w0 = load8(w + r * in + i), w1 = load8(w + r * in + i + 8);
      for (int t = 0; t < TT; ++t) {
        lo[r][t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + t * ldx + i), lo[r][t]);
        hi[r][t] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + t * ldx + i + 8), hi[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TT; ++t) {
      float acc[kDotLanes];
      _mm256_storeu_ps(acc, lo[r][t]);
      _mm256_storeu_ps(acc + 8, hi[r][t]);
      const float s = dot_widened_finish(acc, w + r * in, x + t * ldx, i, in);
      float* dst = y + t * ldy + r;
      *dst = accumulate ? *dst + s : s;
    }
}

// Rows [r0, r1) for a block of TT tokens (16 vector registers: at most 12 accumulators).
template <int TT, typename W>
void rows_for_tokens(const W* w, int64_t in, int64_t r0, int64_t r1, const float* x, int64_t ldx, float* y, int64_t ldy,
                     bool accumulate) {
  constexpr int R = TT == 1 ? 4 : TT <= 3 ? 2 : 1;
  int64_t r = r0;
  for (; r + R <= r1; r += R) tile<R, TT>(w + r * in, in, x, ldx, y + r, ldy, accumulate);
  for (; r < r1; ++r) tile<1, TT>(w + r * in, in, x, ldx, y + r, ldy, accumulate);
}

#endif

#if defined(ZAYA_MATVEC_AVX512) || defined(ZAYA_MATVEC_AVX2)

template <typename W>
void rows_kernel(const W* w, int64_t in, int64_t r0, int64_t r1, const float* x, int64_t ldx, int64_t tokens, float* y,
                 int64_t ldy, bool accumulate) {
  for_matvec_blocks(r0, r1, tokens, [&](auto tt, int64_t rb, int64_t re, int64_t t) {
    rows_for_tokens<decltype(tt)::value>(w, in, rb, re, x + t * ldx, ldx, y + t * ldy, ldy, accumulate);
  });
}

#else  // portable

template <typename W>
void rows_kernel(const W* w, int64_t in, int64_t r0, int64_t r1, const float* x, int64_t ldx, int64_t tokens, float* y,
                 int64_t ldy, bool accumulate) {
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t t = 0; t < tokens; ++t) {
      const float s = dot_widened(w + r * in, x + t * ldx, in);
      float* dst = y + t * ldy + r;
      *dst = accumulate ? *dst + s : s;
    }
}

#endif

}  // namespace

const char* matvec_kernel_name() {
#if defined(ZAYA_MATVEC_AVX512)
  return "avx512";
#elif defined(ZAYA_MATVEC_AVX2)
  return "avx2";
#else
  return "portable";
#endif
}

const char* weight_type_name(WeightType t) {
  if (t == WeightType::kMXFP4 || t == WeightType::kFP8) return t == WeightType::kMXFP4 ? "mxfp4" : "fp8";
  return t == WeightType::kI8 ? "int8" : t == WeightType::kBF16 ? "bf16" : "f32";
}

int64_t weight_row_bytes(WeightType t, int64_t cols) {
  if (t == WeightType::kMXFP4 || t == WeightType::kFP8)
    return t == WeightType::kMXFP4 ? mxfp4_row_bytes(cols) : fp8_row_bytes(cols);
  return t == WeightType::kI8 ? q8_0_row_bytes(cols) : t == WeightType::kBF16 ? 2 * cols : 4 * cols;
}

void weight_row_f32(WeightType t, const void* w, int64_t cols, int64_t row, float* dst) {
  const uint8_t* src = static_cast<const uint8_t*>(w) + row * weight_row_bytes(t, cols);
  if (t == WeightType::kMXFP4) {
    dequantize_mxfp4_row(src, cols, dst);
  } else if (t == WeightType::kFP8) {
    dequantize_fp8_row(src, cols, dst);
  } else if (t == WeightType::kI8) {
    dequantize_q8_0_split(src, cols, dst);
  } else if (t == WeightType::kBF16) {
    const uint16_t* p = reinterpret_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < cols; ++i) dst[i] = bf16_to_float(p[i]);
  } else {
    std::memcpy(dst, src, sizeof(float) * size_t(cols));
  }
}

void matvec_rows(WeightType type, const void* w, int64_t in, int64_t r0, int64_t r1, const float* x, int64_t ldx,
                 int64_t tokens, float* y, int64_t ldy, bool accumulate) {
  if (r0 >= r1 || tokens <= 0) return;
  if (in == 0) {
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t r = r0; r < r1; ++r)
        if (!accumulate) y[t * ldy + r] = 0;
    return;
  }
  if (type == WeightType::kFP8 && fp8_bf16_activations()) {  // bf16 activations (ops/matvec_fp8_bf16.h)
    matvec_fp8_bf16_rows(static_cast<const uint8_t*>(w), in, r0, r1, x, ldx, tokens, y, ldy, accumulate);
  } else if (type == WeightType::kMXFP4 || type == WeightType::kFP8) {  // float32 activations (ops/matvec_lowbit.h)
    matvec_lowbit_rows(type, static_cast<const uint8_t*>(w), in, r0, r1, x, ldx, tokens, y, ldy, accumulate);
  } else if (type == WeightType::kI8) {
    // The activations quantized per call (thread_local: reused, no allocation per step).
    thread_local Q8Activations xq;
    xq.quantize(x, ldx, tokens, in);
    matvec_q8_rows(static_cast<const uint8_t*>(w), r0, r1, xq, y, ldy, accumulate);
  } else if (type == WeightType::kBF16) {
    rows_kernel(static_cast<const uint16_t*>(w), in, r0, r1, x, ldx, tokens, y, ldy, accumulate);
  } else {
    rows_kernel(static_cast<const float*>(w), in, r0, r1, x, ldx, tokens, y, ldy, accumulate);
  }
}

int64_t matvec_piece_rows(int64_t out, int threads) {
  const int64_t share = (out + std::max(threads, 1) - 1) / std::max(threads, 1);
  return std::max<int64_t>(8, (share + 7) / 8 * 8);
}

void matvec(WeightType type, const void* w, int64_t in, int64_t out, const float* x, int64_t ldx, int64_t tokens,
            float* y, int64_t ldy, bool accumulate) {
  if (type == WeightType::kI8 && in > 0 && tokens > 0) {  // quantized once, read by every thread
    thread_local Q8Activations xq;
    xq.quantize(x, ldx, tokens, in);
    matvec_q8(static_cast<const uint8_t*>(w), out, xq, y, ldy, accumulate);
    return;
  }
  const int threads = omp_get_max_threads();
  if (threads <= 1 || out * in * tokens < kMatvecParallelMinMacs) {
    matvec_rows(type, w, in, 0, out, x, ldx, tokens, y, ldy, accumulate);
    return;
  }
  const int64_t piece = matvec_piece_rows(out, threads);
  pool_for((out + piece - 1) / piece, threads, [&](int64_t i, int) {
    matvec_rows(type, w, in, i * piece, std::min(out, (i + 1) * piece), x, ldx, tokens, y, ldy, accumulate);
  });
}

void matvec_reference(WeightType type, const void* w, int64_t in, int64_t out, const float* x, int64_t ldx,
                      int64_t tokens, float* y, int64_t ldy, bool accumulate) {
  if (type == WeightType::kI8 && in > 0) {  // the quantized-activation product (ops/matvec_q8.h)
    Q8Activations xq;
    xq.quantize(x, ldx, tokens, in);
    matvec_q8_reference(static_cast<const uint8_t*>(w), out, xq, y, ldy, accumulate);
    return;
  }
  std::vector<float> row(static_cast<size_t>(in));
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t r = 0; r < out; ++r) {
      weight_row_f32(type, w, in, r, row.data());
      double s = 0;
      for (int64_t i = 0; i < in; ++i) s += double(row[size_t(i)]) * double(x[t * ldx + i]);
      float* dst = y + t * ldy + r;
      *dst = accumulate ? float(double(*dst) + s) : float(s);
    }
}

}  // namespace zaya
