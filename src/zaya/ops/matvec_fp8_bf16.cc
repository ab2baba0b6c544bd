#include "zaya/ops/matvec_fp8_bf16.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "zaya/core/bf16.h"
#include "zaya/core/error.h"
#include "zaya/core/fp8.h"
#include "zaya/ops/matvec_blocks.h"

// The AVX-512 BF16 and AVX2 kernels are compiled with target attributes whatever the build's -march, and chosen
// at run time from the CPU's feature flags (as ops/matvec_lowbit.cc's).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define ZAYA_FP8B_X86 1
#define ZAYA_TARGET_FP8B512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma")))
#define ZAYA_TARGET_FP8B2 __attribute__((target("avx2,fma,f16c")))
// GCC 12's AVX-512 intrinsics fill unused mask lanes from _mm512_undefined_*() (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace zaya {
namespace {

void fp8b_check(int64_t in) { ZAYA_ASSERT(in % 32 == 0); }

void fp8b_store(float* dst, float s, bool accumulate) { *dst = accumulate ? *dst + s : s; }

float fp8b_scale(const uint8_t* row, int64_t in, int64_t g) {
  float s;
  std::memcpy(&s, row + in + 4 * g, 4);
  return s;
}

// Tokens [0, tokens) of x rounded to bf16 as floats, row t at out + t * in.
void fp8b_round_f32(const float* x, int64_t ldx, int64_t tokens, int64_t in, float* out) {
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t i = 0; i < in; ++i) out[t * in + i] = fp8_activation_bf16(x[t * ldx + i]);
}

#ifdef ZAYA_FP8B_X86

bool fp8b_cpu_avx512bf16() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("fma");
  return has;
}

bool fp8b_cpu_avx2() {
  static const bool has =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  return has;
}

// bf16 bits of the 7 E4M3 subnormals m x 2^-9 at [m] (and 0 at [0]), 32 words: vpermw's table.
const uint16_t* fp8b_subnormal_table() {
  static const std::vector<uint16_t> table = [] {
    std::vector<uint16_t> t(32, 0);
    for (int m = 1; m < 8; ++m) t[size_t(m)] = float_to_bf16(std::ldexp(float(m), -9));
    return t;
  }();
  return table.data();
}

// Tokens [0, tokens) of x as bf16 bits (vcvtneps2bf16: nearest even, subnormal inputs to zero), row t at
// out + t * in.
ZAYA_TARGET_FP8B512 void fp8b_round_bf16_512(const float* x, int64_t ldx, int64_t tokens, int64_t in, uint16_t* out) {
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t i = 0; i < in; i += 16) {
      const __m256bh b = _mm512_cvtneps_pbh(_mm512_loadu_ps(x + t * ldx + i));
      std::memcpy(out + t * in + i, &b, 32);
    }
}

// 32 E4M3 bytes as 32 bf16 words of the same values, in order: the 7 magnitude bits shifted under bf16's exponent
// and mantissa with the exponent bias raised by 120 (exact for normal codes), the 7 subnormal codes (m x 2^-9)
// from a table, the sign to bit 15.
ZAYA_TARGET_FP8B512 inline __m512i fp8b_decode32(const uint8_t* p, __m512i subnormals) {
  const __m512i v = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  const __m512i mag = _mm512_and_si512(v, _mm512_set1_epi16(0x7f));
  __m512i bf = _mm512_add_epi16(_mm512_slli_epi16(mag, 4), _mm512_set1_epi16(120 << 7));
  bf = _mm512_mask_permutexvar_epi16(bf, _mm512_cmplt_epu16_mask(mag, _mm512_set1_epi16(8)), mag, subnormals);
  return _mm512_or_si512(bf, _mm512_slli_epi16(_mm512_and_si512(v, _mm512_set1_epi16(0x80)), 8));
}

template <int TT>
ZAYA_TARGET_FP8B512 void fp8b_rows_512(const uint8_t* w, int64_t row_bytes, int64_t in, int64_t r0, int64_t r1,
                                       const uint16_t* xb, float* y, int64_t ldy, bool accumulate) {
  const __m512i subnormals = _mm512_loadu_si512(fp8b_subnormal_table());
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w + r * row_bytes;
    __m512 acc[TT];
    for (int t = 0; t < TT; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t g0 = 0; g0 < in; g0 += kFp8ScaleGroup) {
      const int64_t g1 = std::min(in, g0 + kFp8ScaleGroup);
      // Two sums per token (even and odd 32-column chunks): half the chain of dependent vdpbf16ps.
      __m512 d0[TT], d1[TT];
      for (int t = 0; t < TT; ++t) d0[t] = d1[t] = _mm512_setzero_ps();
      int64_t c = g0;
      for (; c + 64 <= g1; c += 64) {
        const __m512bh w0 = (__m512bh)fp8b_decode32(row + c, subnormals);
        const __m512bh w1 = (__m512bh)fp8b_decode32(row + c + 32, subnormals);
        for (int t = 0; t < TT; ++t) {
          d0[t] = _mm512_dpbf16_ps(d0[t], w0, (__m512bh)_mm512_loadu_si512(xb + t * in + c));
          d1[t] = _mm512_dpbf16_ps(d1[t], w1, (__m512bh)_mm512_loadu_si512(xb + t * in + c + 32));
        }
      }
      if (c < g1) {  // a last group of 32 or 96 columns
        const __m512bh w0 = (__m512bh)fp8b_decode32(row + c, subnormals);
        for (int t = 0; t < TT; ++t) d0[t] = _mm512_dpbf16_ps(d0[t], w0, (__m512bh)_mm512_loadu_si512(xb + t * in + c));
      }
      const __m512 s = _mm512_set1_ps(fp8b_scale(row, in, g0 / kFp8ScaleGroup));
      for (int t = 0; t < TT; ++t) acc[t] = _mm512_fmadd_ps(_mm512_add_ps(d0[t], d1[t]), s, acc[t]);
    }
    for (int t = 0; t < TT; ++t) fp8b_store(y + t * ldy + r, _mm512_reduce_add_ps(acc[t]), accumulate);
  }
}

ZAYA_TARGET_FP8B2 inline __m256 fp8b_decode8_f32(__m128i bytes8) {  // 2^-8 times the values, exact
  const __m128i v = _mm_cvtepu8_epi16(bytes8);
  const __m128i h = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(v, _mm_set1_epi16(0x7f)), 7),
                                 _mm_slli_epi16(_mm_and_si128(v, _mm_set1_epi16(0x80)), 8));
  return _mm256_cvtph_ps(h);
}

ZAYA_TARGET_FP8B2 inline float fp8b_hsum256(__m256 v) {
  const __m128 half = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 quarter = _mm_add_ps(half, _mm_movehl_ps(half, half));
  return _mm_cvtss_f32(_mm_add_ss(quarter, _mm_movehdup_ps(quarter)));
}

template <int TT>
ZAYA_TARGET_FP8B2 void fp8b_rows_avx2(const uint8_t* w, int64_t row_bytes, int64_t in, int64_t r0, int64_t r1,
                                      const float* xr, float* y, int64_t ldy, bool accumulate) {
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w + r * row_bytes;
    __m256 acc[TT];
    for (int t = 0; t < TT; ++t) acc[t] = _mm256_setzero_ps();
    for (int64_t g0 = 0; g0 < in; g0 += kFp8ScaleGroup) {
      const int64_t g1 = std::min(in, g0 + kFp8ScaleGroup);
      __m256 d[TT];
      for (int t = 0; t < TT; ++t) d[t] = _mm256_setzero_ps();
      for (int64_t c = g0; c < g1; c += 16) {
        const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + c));
        const __m256 w0 = fp8b_decode8_f32(bytes), w1 = fp8b_decode8_f32(_mm_srli_si128(bytes, 8));
        for (int t = 0; t < TT; ++t) {
          d[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xr + t * in + c), d[t]);
          d[t] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xr + t * in + c + 8), d[t]);
        }
      }
      const __m256 s = _mm256_set1_ps(fp8b_scale(row, in, g0 / kFp8ScaleGroup) * 256.0f);
      for (int t = 0; t < TT; ++t) acc[t] = _mm256_fmadd_ps(d[t], s, acc[t]);
    }
    for (int t = 0; t < TT; ++t) fp8b_store(y + t * ldy + r, fp8b_hsum256(acc[t]), accumulate);
  }
}

// The activations rounded once per call (bf16 bits for vdpbf16ps, bf16-valued floats for AVX2), then the blocks of
// ops/matvec_blocks.h.
template <bool kAvx512>
void fp8b_run(const uint8_t* w, int64_t in, int64_t r0, int64_t r1, const float* x, int64_t ldx, int64_t tokens,
              float* y, int64_t ldy, bool accumulate) {
  thread_local std::vector<std::conditional_t<kAvx512, uint16_t, float>> xa;
  xa.resize(size_t(tokens * in));
  if constexpr (kAvx512)
    fp8b_round_bf16_512(x, ldx, tokens, in, xa.data());
  else
    fp8b_round_f32(x, ldx, tokens, in, xa.data());
  const int64_t row_bytes = fp8_row_bytes(in);
  for_matvec_blocks(r0, r1, tokens, [&](auto tt, int64_t rb, int64_t re, int64_t t) {
    constexpr int TT = decltype(tt)::value;
    if constexpr (kAvx512)
      fp8b_rows_512<TT>(w, row_bytes, in, rb, re, xa.data() + t * in, y + t * ldy, ldy, accumulate);
    else
      fp8b_rows_avx2<TT>(w, row_bytes, in, rb, re, xa.data() + t * in, y + t * ldy, ldy, accumulate);
  });
}

#else

bool fp8b_cpu_avx512bf16() { return false; }
bool fp8b_cpu_avx2() { return false; }

#endif

}  // namespace

float fp8_activation_bf16(float x) {
  if (std::fabs(x) < 0x1p-126f) x = std::copysign(0.0f, x);  // subnormal inputs read as zero, as vcvtneps2bf16
  return bf16_to_float(float_to_bf16(x));
}

bool matvec_fp8_bf16_has_avx512bf16() { return fp8b_cpu_avx512bf16(); }
bool matvec_fp8_bf16_has_avx2() { return fp8b_cpu_avx2(); }

void matvec_fp8_bf16_rows_portable(const uint8_t* w, int64_t in, int64_t r0, int64_t r1, const float* x, int64_t ldx,
                                   int64_t tokens, float* y, int64_t ldy, bool accumulate) {
  fp8b_check(in);
  const int64_t row_bytes = fp8_row_bytes(in);
  thread_local std::vector<float> xr;
  xr.resize(size_t(tokens * in));
  fp8b_round_f32(x, ldx, tokens, in, xr.data());
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w + r * row_bytes;
    for (int64_t t = 0; t < tokens; ++t) {
      float acc = 0;
      for (int64_t g0 = 0; g0 < in; g0 += kFp8ScaleGroup) {
        float d = 0;
        for (int64_t i = g0; i < std::min(in, g0 + kFp8ScaleGroup); ++i)
          d += e4m3_to_float(row[i]) * xr[size_t(t * in + i)];
        acc += fp8b_scale(row, in, g0 / kFp8ScaleGroup) * d;
      }
      fp8b_store(y + t * ldy + r, acc, accumulate);
    }
  }
}

void matvec_fp8_bf16_rows_avx512bf16(const uint8_t* w, int64_t in, int64_t r0, int64_t r1, const float* x, int64_t ldx,
                                     int64_t tokens, float* y, int64_t ldy, bool accumulate) {
  fp8b_check(in);
  ZAYA_ASSERT(fp8b_cpu_avx512bf16());
#ifdef ZAYA_FP8B_X86
  fp8b_run<true>(w, in, r0, r1, x, ldx, tokens, y, ldy, accumulate);
#endif
}

void matvec_fp8_bf16_rows_avx2(const uint8_t* w, int64_t in, int64_t r0, int64_t r1, const float* x, int64_t ldx,
                               int64_t tokens, float* y, int64_t ldy, bool accumulate) {
  fp8b_check(in);
  ZAYA_ASSERT(fp8b_cpu_avx2());
#ifdef ZAYA_FP8B_X86
  fp8b_run<false>(w, in, r0, r1, x, ldx, tokens, y, ldy, accumulate);
#endif
}

void matvec_fp8_bf16_rows(const uint8_t* w, int64_t in, int64_t r0, int64_t r1, const float* x, int64_t ldx,
                          int64_t tokens, float* y, int64_t ldy, bool accumulate) {
  if (r0 >= r1 || tokens <= 0) return;
  if (fp8b_cpu_avx512bf16())
    matvec_fp8_bf16_rows_avx512bf16(w, in, r0, r1, x, ldx, tokens, y, ldy, accumulate);
  else if (fp8b_cpu_avx2())
    matvec_fp8_bf16_rows_avx2(w, in, r0, r1, x, ldx, tokens, y, ldy, accumulate);
  else
    matvec_fp8_bf16_rows_portable(w, in, r0, r1, x, ldx, tokens, y, ldy, accumulate);
}

const char* matvec_fp8_bf16_kernel_name() {
  return fp8b_cpu_avx512bf16() ? "avx512bf16" : fp8b_cpu_avx2() ? "avx2" : "portable";
}

bool fp8_bf16_activations() {
  static const bool bf16 = [] {
    const char* v = std::getenv("ZAYA_FP8_ACTIVATIONS");
    const std::string s = v == nullptr ? "" : v;
    ZAYA_CHECK(s.empty() || s == "bf16" || s == "float",
               "environment variable ZAYA_FP8_ACTIVATIONS is '{}'; allowed: bf16, float (unset: bf16)", s);
    return s != "float";
  }();
  return bf16;
}

}  // namespace zaya
