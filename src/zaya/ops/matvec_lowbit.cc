#include "zaya/ops/matvec_lowbit.h"

#include <cstring>
#include <vector>

#include "zaya/core/error.h"
#include "zaya/core/fp8.h"
#include "zaya/core/mxfp4.h"
#include "zaya/ops/matvec_blocks.h"

// The AVX-512 and AVX2 kernels are compiled with target attributes whatever
// the build's -march, and chosen at run time from the CPU's feature flags
// (as ops/matvec_q8.cc's).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define ZAYA_LOWBIT_X86 1
#define ZAYA_TARGET_LOWBIT512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,f16c,fma")))
#define ZAYA_TARGET_LOWBIT2 __attribute__((target("avx2,fma,f16c")))
// GCC 12's AVX-512 intrinsics fill unused mask lanes from _mm512_undefined_*() (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace zaya {
namespace {

int64_t lowbit_row_bytes(WeightType type, int64_t in) {
  return type == WeightType::kMXFP4 ? mxfp4_row_bytes(in) : fp8_row_bytes(in);
}

// 2^(u - 127) for every E8M0 byte (core/mxfp4.h).
const float* e8m0_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(256);
    for (int u = 0; u < 256; ++u) t[size_t(u)] = e8m0_to_float(uint8_t(u));
    return t;
  }();
  return table.data();
}

// The scale of an FP8 row's 32 columns from 32 g on (core/fp8.h: one per 128 columns).
float fp8_group_scale(const uint8_t* row, int64_t in, int64_t g) {
  float s;
  std::memcpy(&s, row + in + 4 * (32 * g / kFp8ScaleGroup), 4);
  return s;
}

void store_lowbit(float* dst, float s, bool accumulate) { *dst = accumulate ? *dst + s : s; }

#ifdef ZAYA_LOWBIT_X86

bool lowbit_cpu_avx512() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("f16c") && __builtin_cpu_supports("fma");
  return has;
}

bool lowbit_cpu_avx2() {
  static const bool has =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  return has;
}

// E4M3 bytes as IEEE half bits, exactly 2^-8 times their value: the 7 magnitude bits moved under the half's
// 5-bit exponent (bias 15, E4M3's 7), the sign to bit 15; subnormals map to half subnormals.
ZAYA_TARGET_LOWBIT512 inline __m512i e4m3_to_half_bits_512(__m512i v) {
  return _mm512_or_si512(_mm512_slli_epi16(_mm512_and_si512(v, _mm512_set1_epi16(0x7f)), 7),
                         _mm512_slli_epi16(_mm512_and_si512(v, _mm512_set1_epi16(0x80)), 8));
}

// Weights [32 g, 32 g + 32) of a row as two vectors of 16 floats, exact.
template <bool kMx>
ZAYA_TARGET_LOWBIT512 inline void decode32_avx512(const uint8_t* row, int64_t in, int64_t g, const float* e8m0,
                                                  __m512& w0, __m512& w1) {
  if constexpr (kMx) {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 16 * g));
    const __m128i nib = _mm_set1_epi8(15);
    const __m128i lo = _mm_and_si128(packed, nib), hi = _mm_and_si128(_mm_srli_epi16(packed, 4), nib);
    const __m512 table = _mm512_loadu_ps(kE2M1Values);
    const __m512 s = _mm512_set1_ps(e8m0[row[in / 2 + g]]);
    w0 = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi)), table), s);
    w1 = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpackhi_epi8(lo, hi)), table), s);
  } else {
    const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 32 * g));
    const __m512i h = e4m3_to_half_bits_512(_mm512_cvtepu8_epi16(bytes));
    const __m512 s = _mm512_set1_ps(fp8_group_scale(row, in, g) * 256.0f);
    w0 = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(h)), s);
    w1 = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1)), s);
  }
}

template <bool kMx, int TT>
ZAYA_TARGET_LOWBIT512 void lowbit_rows_avx512(const uint8_t* w, int64_t row_bytes, int64_t in, int64_t r0, int64_t r1,
                                              const float* x, int64_t ldx, float* y, int64_t ldy, bool accumulate) {
  const float* e8m0 = e8m0_table();
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w + r * row_bytes;
    __m512 a0[TT], a1[TT];
    for (int t = 0; t < TT; ++t) a0[t] = a1[t] = _mm512_setzero_ps();
    for (int64_t g = 0; g < in / 32; ++g) {
      __m512 w0, w1;
      decode32_avx512<kMx>(row, in, g, e8m0, w0, w1);
      for (int t = 0; t < TT; ++t) {
        a0[t] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + t * ldx + 32 * g), a0[t]);
        a1[t] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + t * ldx + 32 * g + 16), a1[t]);
      }
    }
    for (int t = 0; t < TT; ++t)
      store_lowbit(y + t * ldy + r, _mm512_reduce_add_ps(_mm512_add_ps(a0[t], a1[t])), accumulate);
  }
}

ZAYA_TARGET_LOWBIT2 inline __m256i e4m3_to_half_bits_256(__m256i v) {
  return _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(v, _mm256_set1_epi16(0x7f)), 7),
                         _mm256_slli_epi16(_mm256_and_si256(v, _mm256_set1_epi16(0x80)), 8));
}

// Weights [32 g, 32 g + 32) of a row as four vectors of 8 floats, exact.
template <bool kMx>
ZAYA_TARGET_LOWBIT2 inline void decode32_avx2(const uint8_t* row, int64_t in, int64_t g, const float* e8m0,
                                              __m256 w[4]) {
  if constexpr (kMx) {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 16 * g));
    const __m128i nib = _mm_set1_epi8(15);
    const __m128i lo = _mm_and_si128(packed, nib), hi = _mm_and_si128(_mm_srli_epi16(packed, 4), nib);
    // Twice the E2M1 values as int8 (exact), halved in the scale.
    const __m128i twice = _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
    const __m128i v0 = _mm_shuffle_epi8(twice, _mm_unpacklo_epi8(lo, hi));
    const __m128i v1 = _mm_shuffle_epi8(twice, _mm_unpackhi_epi8(lo, hi));
    const __m256 s = _mm256_set1_ps(e8m0[row[in / 2 + g]] * 0.5f);
    w[0] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v0)), s);
    w[1] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v0, 8))), s);
    w[2] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v1)), s);
    w[3] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v1, 8))), s);
  } else {
    const __m256 s = _mm256_set1_ps(fp8_group_scale(row, in, g) * 256.0f);
    for (int k = 0; k < 2; ++k) {
      const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 32 * g + 16 * k));
      const __m256i h = e4m3_to_half_bits_256(_mm256_cvtepu8_epi16(bytes));
      w[2 * k] = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(h)), s);
      w[2 * k + 1] = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(h, 1)), s);
    }
  }
}

ZAYA_TARGET_LOWBIT2 inline float hsum256(__m256 v) {
  const __m128 half = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 quarter = _mm_add_ps(half, _mm_movehl_ps(half, half));
  return _mm_cvtss_f32(_mm_add_ss(quarter, _mm_movehdup_ps(quarter)));
}

template <bool kMx, int TT>
ZAYA_TARGET_LOWBIT2 void lowbit_rows_avx2(const uint8_t* w, int64_t row_bytes, int64_t in, int64_t r0, int64_t r1,
                                          const float* x, int64_t ldx, float* y, int64_t ldy, bool accumulate) {
  const float* e8m0 = e8m0_table();
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w + r * row_bytes;
    __m256 a0[TT], a1[TT];
    for (int t = 0; t < TT; ++t) a0[t] = a1[t] = _mm256_setzero_ps();
    for (int64_t g = 0; g < in / 32; ++g) {
      __m256 wv[4];
      decode32_avx2<kMx>(row, in, g, e8m0, wv);
      for (int t = 0; t < TT; ++t) {
        const float* xt = x + t * ldx + 32 * g;
        a0[t] = _mm256_fmadd_ps(wv[0], _mm256_loadu_ps(xt), a0[t]);
        a1[t] = _mm256_fmadd_ps(wv[1], _mm256_loadu_ps(xt + 8), a1[t]);
        a0[t] = _mm256_fmadd_ps(wv[2], _mm256_loadu_ps(xt + 16), a0[t]);
        a1[t] = _mm256_fmadd_ps(wv[3], _mm256_loadu_ps(xt + 24), a1[t]);
      }
    }
    for (int t = 0; t < TT; ++t) store_lowbit(y + t * ldy + r, hsum256(_mm256_add_ps(a0[t], a1[t])), accumulate);
  }
}

template <bool kMx>
ZAYA_TARGET_LOWBIT512 void lowbit_f32_avx512(const uint8_t* w, int64_t row_bytes, int64_t in, int64_t r0, int64_t r1,
                                             float* dst) {
  const float* e8m0 = e8m0_table();
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w + r * row_bytes;
    float* d = dst + (r - r0) * in;
    for (int64_t g = 0; g < in / 32; ++g) {
      __m512 w0, w1;
      decode32_avx512<kMx>(row, in, g, e8m0, w0, w1);
      _mm512_storeu_ps(d + 32 * g, w0);
      _mm512_storeu_ps(d + 32 * g + 16, w1);
    }
  }
}

#else

bool lowbit_cpu_avx512() { return false; }
bool lowbit_cpu_avx2() { return false; }

#endif

void check_lowbit(WeightType type, int64_t in) {
  ZAYA_ASSERT((type == WeightType::kMXFP4 || type == WeightType::kFP8) && in % 32 == 0);
}

}  // namespace

bool matvec_lowbit_has_avx512() { return lowbit_cpu_avx512(); }
bool matvec_lowbit_has_avx2() { return lowbit_cpu_avx2(); }

void matvec_lowbit_rows_portable(WeightType type, const uint8_t* w, int64_t in, int64_t r0, int64_t r1, const float* x,
                                 int64_t ldx, int64_t tokens, float* y, int64_t ldy, bool accumulate) {
  check_lowbit(type, in);
  const int64_t row_bytes = lowbit_row_bytes(type, in);
  thread_local std::vector<float> row;
  row.resize(size_t(in));
  for (int64_t r = r0; r < r1; ++r) {
    if (type == WeightType::kMXFP4)
      dequantize_mxfp4_row(w + r * row_bytes, in, row.data());
    else
      dequantize_fp8_row(w + r * row_bytes, in, row.data());
    for (int64_t t = 0; t < tokens; ++t) {
      float s = 0;
      for (int64_t i = 0; i < in; ++i) s += row[size_t(i)] * x[t * ldx + i];
      store_lowbit(y + t * ldy + r, s, accumulate);
    }
  }
}

void matvec_lowbit_rows_avx512(WeightType type, const uint8_t* w, int64_t in, int64_t r0, int64_t r1, const float* x,
                               int64_t ldx, int64_t tokens, float* y, int64_t ldy, bool accumulate) {
  check_lowbit(type, in);
  ZAYA_ASSERT(lowbit_cpu_avx512());
#ifdef ZAYA_LOWBIT_X86
  const int64_t row_bytes = lowbit_row_bytes(type, in);
  const bool mx = type == WeightType::kMXFP4;
  for_matvec_blocks(r0, r1, tokens, [&](auto tt, int64_t rb, int64_t re, int64_t t) {
    constexpr int TT = decltype(tt)::value;
    (mx ? lowbit_rows_avx512<true, TT> : lowbit_rows_avx512<false, TT>)(w, row_bytes, in, rb, re, x + t * ldx, ldx,
                                                                        y + t * ldy, ldy, accumulate);
  });
#endif
}

void matvec_lowbit_rows_avx2(WeightType type, const uint8_t* w, int64_t in, int64_t r0, int64_t r1, const float* x,
                             int64_t ldx, int64_t tokens, float* y, int64_t ldy, bool accumulate) {
  check_lowbit(type, in);
  ZAYA_ASSERT(lowbit_cpu_avx2());
#ifdef ZAYA_LOWBIT_X86
  const int64_t row_bytes = lowbit_row_bytes(type, in);
  const bool mx = type == WeightType::kMXFP4;
  for_matvec_blocks(r0, r1, tokens, [&](auto tt, int64_t rb, int64_t re, int64_t t) {
    constexpr int TT = decltype(tt)::value;
    (mx ? lowbit_rows_avx2<true, TT> : lowbit_rows_avx2<false, TT>)(w, row_bytes, in, rb, re, x + t * ldx, ldx,
                                                                    y + t * ldy, ldy, accumulate);
  });
#endif
}

void matvec_lowbit_rows(WeightType type, const uint8_t* w, int64_t in, int64_t r0, int64_t r1, const float* x,
                        int64_t ldx, int64_t tokens, float* y, int64_t ldy, bool accumulate) {
  if (r0 >= r1 || tokens <= 0) return;
  if (lowbit_cpu_avx512())
    matvec_lowbit_rows_avx512(type, w, in, r0, r1, x, ldx, tokens, y, ldy, accumulate);
  else if (lowbit_cpu_avx2())
    matvec_lowbit_rows_avx2(type, w, in, r0, r1, x, ldx, tokens, y, ldy, accumulate);
  else
    matvec_lowbit_rows_portable(type, w, in, r0, r1, x, ldx, tokens, y, ldy, accumulate);
}

void lowbit_rows_f32(WeightType type, const uint8_t* w, int64_t in, int64_t r0, int64_t r1, float* dst) {
  check_lowbit(type, in);
  const int64_t row_bytes = lowbit_row_bytes(type, in);
#ifdef ZAYA_LOWBIT_X86
  if (lowbit_cpu_avx512()) {
    (type == WeightType::kMXFP4 ? lowbit_f32_avx512<true> : lowbit_f32_avx512<false>)(w, row_bytes, in, r0, r1, dst);
    return;
  }
#endif
  for (int64_t r = r0; r < r1; ++r) {
    if (type == WeightType::kMXFP4)
      dequantize_mxfp4_row(w + r * row_bytes, in, dst + (r - r0) * in);
    else
      dequantize_fp8_row(w + r * row_bytes, in, dst + (r - r0) * in);
  }
}

const char* matvec_lowbit_kernel_name() {
  return lowbit_cpu_avx512() ? "avx512" : lowbit_cpu_avx2() ? "avx2" : "portable";
}

}  // namespace zaya
