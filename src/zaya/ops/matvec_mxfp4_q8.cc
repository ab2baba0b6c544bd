#include "zaya/ops/matvec_mxfp4_q8.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "zaya/core/error.h"
#include "zaya/core/mxfp4.h"
#include "zaya/core/work_pool.h"
#include "zaya/ops/matvec.h"
#include "zaya/ops/matvec_blocks.h"

// The VNNI and AVX2 kernels are compiled with target attributes whatever the
// build's -march, and chosen at run time from the CPU's feature flags (as
// ops/matvec_q8.cc's).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define ZAYA_MXQ8_X86 1
#define ZAYA_TARGET_MXQ8_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define ZAYA_TARGET_MXQ8_AVX2 __attribute__((target("avx2,fma")))
// GCC 12's AVX-512 intrinsics fill unused mask lanes from _mm512_undefined_*() (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace zaya {
namespace {

// Twice the E2M1 value of each code (core/mxfp4.h's kE2M1Values x 2), exact int8.
constexpr int8_t kTwiceE2M1[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// Half the block scale, 2^(u - 128): the factor of a block's integer dot over twice the E2M1 values.
float mxq8_half_scale(uint8_t u) { return std::ldexp(1.0f, int(u) - 128); }

void store_mxq8(float* dst, float s, bool accumulate) { *dst = accumulate ? *dst + s : s; }

// The formula of the header, one block at a time: integer dot, then (dw * dx) * dot added in order.
void mxq8_rows_portable(const uint8_t* w, int64_t r0, int64_t r1, const Q8Activations& xq, float* y, int64_t ldy,
                        bool accumulate) {
  const int64_t in = xq.in(), blocks = in / kMxBlock, row_bytes = mxfp4_row_bytes(in);
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w + r * row_bytes;
    for (int64_t t = 0; t < xq.tokens(); ++t) {
      const Q8ActivationPair* xp = xq.row(t);
      float s = 0;
      for (int64_t b = 0; b < blocks; ++b) {
        const int8_t* qx = xp[b / 2].q + 32 * (b % 2);
        int64_t dot = 0;  // 64-bit: see ops/matvec_q8.cc's rows_portable (GCC's vpdpbusd vectorization)
        for (int i = 0; i < 16; ++i) {
          const uint8_t byte = row[16 * b + i];
          dot += int64_t(kTwiceE2M1[byte & 15]) * qx[2 * i] + int64_t(kTwiceE2M1[byte >> 4]) * qx[2 * i + 1];
        }
        s += mxq8_half_scale(row[in / 2 + b]) * xp[b / 2].d[8 * (b % 2)] * float(dot);
      }
      store_mxq8(y + t * ldy + r, s, accumulate);
    }
  }
}

#ifdef ZAYA_MXQ8_X86

bool mxq8_cpu_has_vnni() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  return has;
}

bool mxq8_cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

// R MXFP4 rows x TT tokens, as ops/matvec_q8.cc's tile_vnni. Per pair of
// blocks (64 weights, 32 packed bytes) and row: the bytes widened to 16 bits
// and each word rebuilt as (low nibble, high nibble) in its two bytes, so
// byte k holds the code of element k; one vpshufb through the table of
// 128 + 2 e2m1 (unsigned, as vpdpbusd wants: Q8ActivationPair's correction
// -128 sum qx takes the 128 back out); per token one vpdpbusd (4 exact
// products per lane), a conversion and an FMA with the product of the scales.
// The block scales, 16 at a time, are 0.5 x 2^(u - 127) by vscalefps (exact,
// subnormal 2^-128 for u = 0 included).
template <int R, int TT>
ZAYA_TARGET_MXQ8_VNNI inline void mxq8_tile_vnni(const uint8_t* w, int64_t row_bytes, int64_t in,
                                                 const Q8ActivationPair* x, int64_t x_stride, float* y, int64_t ldy,
                                                 bool accumulate) {
  const int64_t blocks = in / kMxBlock, full = blocks / 2;
  __m512 acc[R][TT];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TT; ++t) acc[r][t] = _mm512_setzero_ps();
  const __m512i table = _mm512_broadcast_i32x4(
      _mm_setr_epi8(char(128), char(129), char(130), char(131), char(132), char(134), char(136), char(140), char(128),
                    char(127), char(126), char(125), char(124), char(122), char(120), char(116)));
  const __m512i low4 = _mm512_set1_epi16(0x000F), high4 = _mm512_set1_epi16(0x0F00);
  const __m512i first_pair = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512i next_pair = _mm512_set1_epi32(2);
  const __m512 half = _mm512_set1_ps(0.5f);
  // The next tile's rows follow this one's: fetch them one tile ahead, spread over this tile's pairs.
  constexpr int kLinesPerPair = (R * 34 + 63) / 64;
  const uint8_t* next = w + R * row_bytes;
  __m512 scales[R];
  __m512i pick = first_pair;
  for (int64_t p = 0; p < (blocks + 1) / 2; ++p) {
    const uint8_t* pf = next + p * R * 34;
    for (int l = 0; l < kLinesPerPair; ++l) _mm_prefetch(reinterpret_cast<const char*>(pf + 64 * l), _MM_HINT_T0);
    if (p % 8 == 0) {  // the scales of blocks 2p .. 2p + 15 (fewer at the row's end: u = 0, times a zero dot)
      const int64_t left = blocks - 2 * p;
      const __mmask16 m = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1u);
      for (int r = 0; r < R; ++r) {
        const __m512i u = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, w + r * row_bytes + in / 2 + 2 * p));
        scales[r] = _mm512_scalef_ps(half, _mm512_cvtepi32_ps(_mm512_sub_epi32(u, _mm512_set1_epi32(127))));
      }
      pick = first_pair;
    }
    for (int r = 0; r < R; ++r) {
      const uint8_t* q = w + r * row_bytes + 32 * p;
      // The last block alone (an odd count): 16 bytes, the upper half zeros (and so are the activations').
      const __m256i packed = p < full ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q))
                                      : _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
      const __m512i v = _mm512_cvtepu8_epi16(packed);
      const __m512i codes =
          _mm512_or_si512(_mm512_and_si512(v, low4), _mm512_and_si512(_mm512_slli_epi16(v, 4), high4));
      const __m512i wq = _mm512_shuffle_epi8(table, codes);
      const __m512 dw = _mm512_permutexvar_ps(pick, scales[r]);
      for (int t = 0; t < TT; ++t) {
        const Q8ActivationPair& xp = x[t * x_stride + p];
        const __m512i dot = _mm512_dpbusd_epi32(_mm512_load_si512(reinterpret_cast<const __m512i*>(xp.corr)), wq,
                                                _mm512_load_si512(reinterpret_cast<const __m512i*>(xp.q)));
        acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dw, _mm512_load_ps(xp.d)), acc[r][t]);
      }
    }
    pick = _mm512_add_epi32(pick, next_pair);
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TT; ++t) store_mxq8(y + t * ldy + r, _mm512_reduce_add_ps(acc[r][t]), accumulate);
}

template <int TT>
ZAYA_TARGET_MXQ8_VNNI void mxq8_rows_for_tokens_vnni(const uint8_t* w, int64_t row_bytes, int64_t in, int64_t r0,
                                                     int64_t r1, const Q8ActivationPair* x, int64_t x_stride, float* y,
                                                     int64_t ldy, bool accumulate) {
  constexpr int R = TT == 1 ? 8 : 4;
  int64_t r = r0;
  for (; r + R <= r1; r += R)
    mxq8_tile_vnni<R, TT>(w + r * row_bytes, row_bytes, in, x, x_stride, y + r, ldy, accumulate);
  for (; r < r1; ++r) mxq8_tile_vnni<1, TT>(w + r * row_bytes, row_bytes, in, x, x_stride, y + r, ldy, accumulate);
}

void mxq8_rows_vnni(const uint8_t* w, int64_t r0, int64_t r1, const Q8Activations& xq, float* y, int64_t ldy,
                    bool accumulate) {
  const int64_t in = xq.in(), row_bytes = mxfp4_row_bytes(in), stride = xq.pairs();
  for_matvec_blocks(r0, r1, xq.tokens(), [&](auto tt, int64_t rb, int64_t re, int64_t t) {
    mxq8_rows_for_tokens_vnni<decltype(tt)::value>(w, row_bytes, in, rb, re, xq.row(t), stride, y + t * ldy, ldy,
                                                   accumulate);
  });
}

// R rows x TT tokens for CPUs with AVX2 but not AVX512-VNNI, as ops/matvec_q8.cc's tile_avx2: per block, the
// 16 packed bytes widened and split into 32 codes in element order, vpshufb through 2 e2m1 (signed int8), then
// vpmaddubsw of |w| with x carrying w's sign (pair sums at most 2 x 12 x 127: no saturation), vpmaddwd by ones
// into 8 exact lanes, a conversion and an FMA with dw x dx.
template <int R, int TT>
ZAYA_TARGET_MXQ8_AVX2 inline void mxq8_tile_avx2(const uint8_t* w, int64_t row_bytes, int64_t in,
                                                 const Q8ActivationPair* x, int64_t x_stride, float* y, int64_t ldy,
                                                 bool accumulate) {
  const int64_t blocks = in / kMxBlock;
  __m256 acc[R][TT];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TT; ++t) acc[r][t] = _mm256_setzero_ps();
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kTwiceE2M1)));
  const __m256i low4 = _mm256_set1_epi16(0x000F), high4 = _mm256_set1_epi16(0x0F00);
  constexpr int kLinesPerBlock = (R * 17 + 63) / 64;
  const uint8_t* next = w + R * row_bytes;
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* pf = next + b * R * 17;
    for (int l = 0; l < kLinesPerBlock; ++l) _mm_prefetch(reinterpret_cast<const char*>(pf + 64 * l), _MM_HINT_T0);
    for (int r = 0; r < R; ++r) {
      const uint8_t* row = w + r * row_bytes;
      const __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 16 * b)));
      const __m256i codes =
          _mm256_or_si256(_mm256_and_si256(v, low4), _mm256_and_si256(_mm256_slli_epi16(v, 4), high4));
      const __m256i wq = _mm256_shuffle_epi8(table, codes);
      const __m256i wabs = _mm256_sign_epi8(wq, wq);
      const float dw = mxq8_half_scale(row[in / 2 + b]);
      for (int t = 0; t < TT; ++t) {
        const Q8ActivationPair& xp = x[t * x_stride + b / 2];
        const __m256i xv = _mm256_load_si256(reinterpret_cast<const __m256i*>(xp.q + 32 * (b % 2)));
        const __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(wabs, _mm256_sign_epi8(xv, wq)), ones);
        acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(dw * xp.d[8 * (b % 2)]), acc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TT; ++t) {
      const __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc[r][t]), _mm256_extractf128_ps(acc[r][t], 1));
      const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
      store_mxq8(y + t * ldy + r, _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q))), accumulate);
    }
}

template <int TT>
ZAYA_TARGET_MXQ8_AVX2 void mxq8_rows_for_tokens_avx2(const uint8_t* w, int64_t row_bytes, int64_t in, int64_t r0,
                                                     int64_t r1, const Q8ActivationPair* x, int64_t x_stride, float* y,
                                                     int64_t ldy, bool accumulate) {
  constexpr int R = TT == 1 ? 4 : 2;  // at most 8 accumulators of 16 registers
  int64_t r = r0;
  for (; r + R <= r1; r += R)
    mxq8_tile_avx2<R, TT>(w + r * row_bytes, row_bytes, in, x, x_stride, y + r, ldy, accumulate);
  for (; r < r1; ++r) mxq8_tile_avx2<1, TT>(w + r * row_bytes, row_bytes, in, x, x_stride, y + r, ldy, accumulate);
}

void mxq8_rows_avx2(const uint8_t* w, int64_t r0, int64_t r1, const Q8Activations& xq, float* y, int64_t ldy,
                    bool accumulate) {
  const int64_t in = xq.in(), row_bytes = mxfp4_row_bytes(in), stride = xq.pairs();
  for_matvec_blocks(r0, r1, xq.tokens(), [&](auto tt, int64_t rb, int64_t re, int64_t t) {
    mxq8_rows_for_tokens_avx2<decltype(tt)::value>(w, row_bytes, in, rb, re, xq.row(t), stride, y + t * ldy, ldy,
                                                   accumulate);
  });
}

#else

bool mxq8_cpu_has_vnni() { return false; }
bool mxq8_cpu_has_avx2() { return false; }

#endif

bool mxq8_empty_product(int64_t r0, int64_t r1, const Q8Activations& xq) {
  ZAYA_ASSERT(xq.in() % kMxBlock == 0);
  return r0 >= r1 || xq.tokens() <= 0;
}

}  // namespace

bool matvec_mxfp4_q8_has_vnni() { return mxq8_cpu_has_vnni(); }
bool matvec_mxfp4_q8_has_avx2() { return mxq8_cpu_has_avx2(); }

void matvec_mxfp4_q8_rows_portable(const uint8_t* w, int64_t r0, int64_t r1, const Q8Activations& xq, float* y,
                                   int64_t ldy, bool accumulate) {
  if (!mxq8_empty_product(r0, r1, xq)) mxq8_rows_portable(w, r0, r1, xq, y, ldy, accumulate);
}

void matvec_mxfp4_q8_rows_vnni(const uint8_t* w, int64_t r0, int64_t r1, const Q8Activations& xq, float* y, int64_t ldy,
                               bool accumulate) {
  ZAYA_ASSERT(mxq8_cpu_has_vnni());
  if (mxq8_empty_product(r0, r1, xq)) return;
#ifdef ZAYA_MXQ8_X86
  mxq8_rows_vnni(w, r0, r1, xq, y, ldy, accumulate);
#endif
}

void matvec_mxfp4_q8_rows_avx2(const uint8_t* w, int64_t r0, int64_t r1, const Q8Activations& xq, float* y, int64_t ldy,
                               bool accumulate) {
  ZAYA_ASSERT(mxq8_cpu_has_avx2());
  if (mxq8_empty_product(r0, r1, xq)) return;
#ifdef ZAYA_MXQ8_X86
  mxq8_rows_avx2(w, r0, r1, xq, y, ldy, accumulate);
#endif
}

void matvec_mxfp4_q8_rows(const uint8_t* w, int64_t r0, int64_t r1, const Q8Activations& xq, float* y, int64_t ldy,
                          bool accumulate) {
  if (mxq8_empty_product(r0, r1, xq)) return;
#ifdef ZAYA_MXQ8_X86
  if (mxq8_cpu_has_vnni()) {
    mxq8_rows_vnni(w, r0, r1, xq, y, ldy, accumulate);
    return;
  }
  if (mxq8_cpu_has_avx2()) {
    mxq8_rows_avx2(w, r0, r1, xq, y, ldy, accumulate);
    return;
  }
#endif
  mxq8_rows_portable(w, r0, r1, xq, y, ldy, accumulate);
}

void matvec_mxfp4_q8(const uint8_t* w, int64_t out, const Q8Activations& xq, float* y, int64_t ldy, bool accumulate) {
  const int threads = omp_get_max_threads();
  if (threads <= 1 || out * xq.in() * xq.tokens() < kMatvecParallelMinMacs) {
    matvec_mxfp4_q8_rows(w, 0, out, xq, y, ldy, accumulate);
    return;
  }
  const int64_t piece = matvec_piece_rows(out, threads);
  pool_for((out + piece - 1) / piece, threads, [&](int64_t i, int) {
    matvec_mxfp4_q8_rows(w, i * piece, std::min(out, (i + 1) * piece), xq, y, ldy, accumulate);
  });
}

void matvec_mxfp4_q8_reference(const uint8_t* w, int64_t out, const Q8Activations& xq, float* y, int64_t ldy,
                               bool accumulate) {
  const int64_t in = xq.in(), blocks = in / kMxBlock, row_bytes = mxfp4_row_bytes(in);
  for (int64_t t = 0; t < xq.tokens(); ++t)
    for (int64_t r = 0; r < out; ++r) {
      const uint8_t* row = w + r * row_bytes;
      double s = 0;
      for (int64_t b = 0; b < blocks; ++b) {
        int64_t dot = 0;
        for (int64_t i = 0; i < 32; ++i) {
          const int64_t k = 32 * b + i;
          const uint8_t code = k % 2 == 0 ? row[k / 2] & 15 : row[k / 2] >> 4;
          dot += int64_t(kTwiceE2M1[code]) * xq.value(t, k);
        }
        s += double(mxq8_half_scale(row[in / 2 + b])) * double(xq.scale(t, b)) * double(dot);
      }
      float* dst = y + t * ldy + r;
      *dst = accumulate ? float(double(*dst) + s) : float(s);
    }
}

const char* matvec_mxfp4_q8_kernel_name() {
  return mxq8_cpu_has_vnni() ? "vnni" : mxq8_cpu_has_avx2() ? "avx2" : "portable";
}

bool mxfp4_int8_activations() {
  static const bool int8 = [] {
    const char* v = std::getenv("ZAYA_MXFP4_ACTIVATIONS");
    const std::string s = v == nullptr ? "" : v;
    ZAYA_CHECK(s.empty() || s == "int8" || s == "float",
               "environment variable ZAYA_MXFP4_ACTIVATIONS is '{}'; allowed: int8, float (unset: int8)", s);
    return s != "float";
  }();
  return int8;
}

}  // namespace zaya
