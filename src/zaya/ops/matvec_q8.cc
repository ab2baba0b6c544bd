#include "zaya/ops/matvec_q8.h"

#include <omp.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

#include "zaya/core/bf16.h"
#include "zaya/core/error.h"
#include "zaya/core/q8_0.h"
#include "zaya/core/work_pool.h"
#include "zaya/ops/matvec.h"
#include "zaya/ops/matvec_blocks.h"

// The VNNI and AVX2 kernels are compiled with target attributes whatever
// the build's -march, and chosen at run time from the CPU's feature flags.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define ZAYA_Q8_X86 1
#define ZAYA_TARGET_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,f16c")))
#define ZAYA_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
// GCC 12's AVX-512 intrinsics fill unused mask lanes from _mm512_undefined_*(),
// which -Wuninitialized reports at every inlined call (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace zaya {
namespace {

static_assert(sizeof(Q8ActivationPair) == 192);

// The integer part, and why the correction: vpdpbusd multiplies unsigned by
// signed bytes. The kernel feeds it the weights as unsigned, qw + 128 (the sign
// bit flipped), and the activations as signed, so each lane gets
// sum (qw + 128) qx = sum qw qx + 128 sum qx; the second term depends only on
// the activations, and starting the lane at corr = -128 sum qx (computed once
// per quantization, below) leaves the exact sum qw qx. No term overflows: |lane|
// <= 4 * 255 * 128 + 4 * 128 * 128.
void fill_corrections(Q8ActivationPair& p) {
  for (int l = 0; l < 16; ++l)
    p.corr[l] = -128 * (int32_t(p.q[4 * l]) + p.q[4 * l + 1] + p.q[4 * l + 2] + p.q[4 * l + 3]);
}

// One pair of blocks (nblocks = 1: the second is zeros) the scalar way.
void quantize_pair_portable(const float* x, int nblocks, Q8ActivationPair& p) {
  for (int b = 0; b < 2; ++b) {
    float d = 0;
    if (b < nblocks)
      quantize_activation_block(x + 32 * b, p.q + 32 * b, &d);
    else
      std::memset(p.q + 32 * b, 0, 32);
    std::fill(p.d + 8 * b, p.d + 8 * b + 8, d);
  }
  fill_corrections(p);
}

void rows_portable(const uint8_t* w, int64_t r0, int64_t r1, const Q8Activations& xq, float* y, int64_t ldy,
                   bool accumulate) {
  const int64_t blocks = xq.in() / kQ8Block, row_bytes = q8_0_row_bytes(xq.in());
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t t = 0; t < xq.tokens(); ++t) {
      const Q8ActivationPair* xp = xq.row(t);
      float s = 0;
      const uint8_t* row = w + r * row_bytes;  // split layout: values, then scales (core/q8_0.h)
      for (int64_t b = 0; b < blocks; ++b) {
        const uint8_t* qw = row + b * kQ8Block;
        const int8_t* qx = xp[b / 2].q + 32 * (b % 2);
        // Summed in 64 bits: GCC 12 -O2/-O3 with AVX512-VNNI vectorizes the
        // 32-bit sum of int32_t(int8_t(byte)) * int8 products into vpdpbusd,
        // which reads the weights as unsigned (wrong results; the test
        // MatvecQ8.UnitScalesGiveTheExactIntegerDot catches it).
        int64_t dot = 0;
        for (int i = 0; i < 32; ++i) dot += int64_t(int8_t(qw[i])) * qx[i];
        uint16_t h;
        std::memcpy(&h, row + xq.in() + 2 * b, 2);
        s += f16_to_float(h) * xp[b / 2].d[8 * (b % 2)] * float(dot);
      }
      float* dst = y + t * ldy + r;
      *dst = accumulate ? *dst + s : s;
    }
}

#ifdef ZAYA_Q8_X86

bool cpu_has_vnni() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  return has;
}

// quantize_pair_portable with vectors: the same products x * (1 / d), rounded
// to nearest even by vcvtps2dq as std::nearbyint does, so the same bytes.
ZAYA_TARGET_VNNI void quantize_pair_vnni(const float* x, int nblocks, Q8ActivationPair& p) {
  for (int b = 0; b < 2; ++b) {
    float d = 0;
    if (b < nblocks) {
      const __m512 x0 = _mm512_loadu_ps(x + 32 * b), x1 = _mm512_loadu_ps(x + 32 * b + 16);
      const __mmask16 nan =
          __mmask16(_mm512_cmp_ps_mask(x0, x0, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(x1, x1, _CMP_UNORD_Q));
      const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
      __m128i q0 = _mm_setzero_si128(), q1 = _mm_setzero_si128();
      if (nan != 0 || !(amax <= FLT_MAX)) {
        d = std::numeric_limits<float>::quiet_NaN();
      } else {
        d = amax / 127.0f;
        const float id = d >= FLT_MIN ? 1.0f / d : 0.0f;
        if (id == 0.0f) d = 0.0f;
        const __m512 vid = _mm512_set1_ps(id);
        q0 = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(x0, vid)));
        q1 = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(x1, vid)));
      }
      _mm_store_si128(reinterpret_cast<__m128i*>(p.q + 32 * b), q0);
      _mm_store_si128(reinterpret_cast<__m128i*>(p.q + 32 * b + 16), q1);
    } else {
      std::memset(p.q + 32 * b, 0, 32);
    }
    _mm256_store_ps(p.d + 8 * b, _mm256_set1_ps(d));
  }
  // corr = -(128 * the sum of each lane's 4 values): vpdpbusd with 128 as the unsigned operand.
  const __m512i sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(char(0x80)),
                                           _mm512_load_si512(reinterpret_cast<const __m512i*>(p.q)));
  _mm512_store_si512(reinterpret_cast<__m512i*>(p.corr), _mm512_sub_epi32(_mm512_setzero_si512(), sums));
}

// R weight rows x TT tokens over split rows (core/q8_0.h: a row's values, then
// its scales). Per pair of blocks (64 weights) and row: the values loaded with
// one instruction and their sign bit flipped (qw + 128 as unsigned), the two
// scales taken from the row's 16 widened ones (one vpermps); per token one
// vpdpbusd started at the token's correction (the exact integer dot of 4
// products per lane), one conversion and one FMA with the product of the scales.
template <int R, int TT>
ZAYA_TARGET_VNNI inline void tile_vnni(const uint8_t* w, int64_t row_bytes, int64_t in, const Q8ActivationPair* x,
                                       int64_t x_stride, float* y, int64_t ldy, bool accumulate) {
  const int64_t blocks = in / kQ8Block, full = blocks / 2;
  __m512 acc[R][TT];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TT; ++t) acc[r][t] = _mm512_setzero_ps();
  const __m512i flip = _mm512_set1_epi8(char(0x80));
  // Lanes 0-7 pick scale 2j, lanes 8-15 scale 2j + 1 of a row's 16 widened scales.
  const __m512i first_pair = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512i next_pair = _mm512_set1_epi32(2);
  // The next tile's rows follow this one's: fetch them one tile ahead, spread
  // over this tile's pairs (a row of `small` is 0.5-1 KB, too short for the
  // hardware prefetcher to lock on).
  constexpr int kLinesPerPair = (R * 2 * int(kQ8BlockBytes) + 63) / 64;
  const uint8_t* next = w + R * row_bytes;
  __m512 scales[R];
  __m512i pick = first_pair;
  for (int64_t p = 0; p < (blocks + 1) / 2; ++p) {
    const uint8_t* pf = next + p * R * 2 * kQ8BlockBytes;
    for (int l = 0; l < kLinesPerPair; ++l) _mm_prefetch(reinterpret_cast<const char*>(pf + 64 * l), _MM_HINT_T0);
    if (p % 8 == 0) {  // the scales of blocks 2p .. 2p + 15, f16 -> f32 (fewer at the row's end: zeros)
      const int64_t left = blocks - 2 * p;
      const __mmask16 m = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1u);
      for (int r = 0; r < R; ++r)
        scales[r] = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, w + r * row_bytes + in + 4 * p));
      pick = first_pair;
    }
    for (int r = 0; r < R; ++r) {
      const uint8_t* q = w + r * row_bytes + 64 * p;
      // The last block alone (an odd count): the upper half zeros, as the activations' is.
      const __m512i raw = p < full ? _mm512_loadu_si512(q)
                                   : _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)));
      const __m512i wq = _mm512_xor_si512(raw, flip);
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
    for (int t = 0; t < TT; ++t) {
      const float s = _mm512_reduce_add_ps(acc[r][t]);
      float* dst = y + t * ldy + r;
      *dst = accumulate ? *dst + s : s;
    }
}

// Rows [r0, r1) for a block of TT tokens.
template <int TT>
ZAYA_TARGET_VNNI void rows_for_tokens_vnni(const uint8_t* w, int64_t row_bytes, int64_t in, int64_t r0, int64_t r1,
                                           const Q8ActivationPair* x, int64_t x_stride, float* y, int64_t ldy,
                                           bool accumulate) {
  constexpr int R = TT == 1 ? 8 : 4;
  int64_t r = r0;
  for (; r + R <= r1; r += R) tile_vnni<R, TT>(w + r * row_bytes, row_bytes, in, x, x_stride, y + r, ldy, accumulate);
  for (; r < r1; ++r) tile_vnni<1, TT>(w + r * row_bytes, row_bytes, in, x, x_stride, y + r, ldy, accumulate);
}

void rows_vnni(const uint8_t* w, int64_t r0, int64_t r1, const Q8Activations& xq, float* y, int64_t ldy,
               bool accumulate) {
  const int64_t in = xq.in(), row_bytes = q8_0_row_bytes(in), stride = xq.pairs();
  for_matvec_blocks(r0, r1, xq.tokens(), [&](auto tt, int64_t rb, int64_t re, int64_t t) {
    rows_for_tokens_vnni<decltype(tt)::value>(w, row_bytes, in, rb, re, xq.row(t), stride, y + t * ldy, ldy,
                                              accumulate);
  });
}

bool cpu_has_avx2() {
  static const bool has =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  return has;
}

// R rows x TT tokens for CPUs with AVX2 but not AVX512-VNNI (ggml's AVX2
// method). AVX2 has no unsigned x signed byte dot into 32 bits, but
// vpmaddubsw multiplies unsigned by signed bytes into 16-bit pair sums: the
// weights go in as |qw| and the activations as qx with qw's sign (0 where
// qw = 0), so each product is qw qx; a pair sum is at most 2 x 128 x 127 =
// 32,512 in magnitude (128: a -128 weight, which vpsignb leaves as the
// unsigned byte 128), below the 16-bit saturation. vpmaddwd by ones then adds
// pairs into 8 lanes of 4 products, exact integers, converted to float (below
// 2^24) and added into float lanes with the block's two scales. Per block and
// token: two sign operations, two multiply-adds, a conversion and an FMA.
template <int R, int TT>
ZAYA_TARGET_AVX2 inline void tile_avx2(const uint8_t* w, int64_t row_bytes, int64_t in, const Q8ActivationPair* x,
                                       int64_t x_stride, float* y, int64_t ldy, bool accumulate) {
  const int64_t blocks = in / kQ8Block;
  __m256 acc[R][TT];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TT; ++t) acc[r][t] = _mm256_setzero_ps();
  const __m256i ones = _mm256_set1_epi16(1);
  // The next tile's rows follow this one's: fetch them one tile ahead, spread
  // over this tile's blocks.
  constexpr int kLinesPerBlock = (R * int(kQ8BlockBytes) + 63) / 64;
  const uint8_t* next = w + R * row_bytes;
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* pf = next + b * R * kQ8BlockBytes;
    for (int l = 0; l < kLinesPerBlock; ++l) _mm_prefetch(reinterpret_cast<const char*>(pf + 64 * l), _MM_HINT_T0);
    for (int r = 0; r < R; ++r) {
      const uint8_t* row = w + r * row_bytes;
      const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + kQ8Block * b));
      const __m256i wabs = _mm256_sign_epi8(wq, wq);
      uint16_t h;
      std::memcpy(&h, row + in + 2 * b, 2);
      const float dw = _cvtsh_ss(h);
      for (int t = 0; t < TT; ++t) {
        const Q8ActivationPair& xp = x[t * x_stride + b / 2];
        const __m256i xq = _mm256_load_si256(reinterpret_cast<const __m256i*>(xp.q + 32 * (b % 2)));
        const __m256i pairs = _mm256_maddubs_epi16(wabs, _mm256_sign_epi8(xq, wq));
        const __m256i dot = _mm256_madd_epi16(pairs, ones);
        acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(dw * xp.d[8 * (b % 2)]), acc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TT; ++t) {
      const __m128 half = _mm_add_ps(_mm256_castps256_ps128(acc[r][t]), _mm256_extractf128_ps(acc[r][t], 1));
      const __m128 quarter = _mm_add_ps(half, _mm_movehl_ps(half, half));
      const float s = _mm_cvtss_f32(_mm_add_ss(quarter, _mm_movehdup_ps(quarter)));
      float* dst = y + t * ldy + r;
      *dst = accumulate ? *dst + s : s;
    }
}

template <int TT>
ZAYA_TARGET_AVX2 void rows_for_tokens_avx2(const uint8_t* w, int64_t row_bytes, int64_t in, int64_t r0, int64_t r1,
                                           const Q8ActivationPair* x, int64_t x_stride, float* y, int64_t ldy,
                                           bool accumulate) {
  constexpr int R = TT == 1 ? 4 : 2;  // at most 8 accumulators of 16 registers
  int64_t r = r0;
  for (; r + R <= r1; r += R) tile_avx2<R, TT>(w + r * row_bytes, row_bytes, in, x, x_stride, y + r, ldy, accumulate);
  for (; r < r1; ++r) tile_avx2<1, TT>(w + r * row_bytes, row_bytes, in, x, x_stride, y + r, ldy, accumulate);
}

void rows_avx2(const uint8_t* w, int64_t r0, int64_t r1, const Q8Activations& xq, float* y, int64_t ldy,
               bool accumulate) {
  const int64_t in = xq.in(), row_bytes = q8_0_row_bytes(in), stride = xq.pairs();
  for_matvec_blocks(r0, r1, xq.tokens(), [&](auto tt, int64_t rb, int64_t re, int64_t t) {
    rows_for_tokens_avx2<decltype(tt)::value>(w, row_bytes, in, rb, re, xq.row(t), stride, y + t * ldy, ldy,
                                              accumulate);
  });
}

#else

bool cpu_has_vnni() { return false; }
bool cpu_has_avx2() { return false; }

#endif

}  // namespace

void quantize_activation_block(const float* x, int8_t* q, float* d) {
  float amax = 0;
  bool finite = true;
  for (int i = 0; i < 32; ++i) {
    const float a = std::fabs(x[i]);
    finite = finite && a <= FLT_MAX;  // false for NaN and infinity
    amax = std::max(amax, a);
  }
  if (!finite) {
    *d = std::numeric_limits<float>::quiet_NaN();
    std::memset(q, 0, 32);
    return;
  }
  float s = amax / 127.0f;
  const float id = s >= FLT_MIN ? 1.0f / s : 0.0f;
  if (id == 0.0f) s = 0.0f;
  for (int i = 0; i < 32; ++i) q[i] = int8_t(std::nearbyint(x[i] * id));  // |x * id| <= 127 after rounding
  *d = s;
}

void Q8Activations::quantize(const float* x_TI, int64_t ldx, int64_t tokens, int64_t in, bool portable) {
  ZAYA_ASSERT(in % kQ8Block == 0 && tokens >= 0);
  tokens_ = tokens;
  in_ = in;
  const int64_t np = pairs(), blocks = in / kQ8Block;
  if (int64_t(data_.size()) < tokens * np) data_.resize(size_t(tokens * np));
  const bool vnni = !portable && cpu_has_vnni();
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t p = 0; p < np; ++p) {
      const float* x = x_TI + t * ldx + 64 * p;
      const int nb = int(std::min<int64_t>(2, blocks - 2 * p));
      Q8ActivationPair& dst = data_[size_t(t * np + p)];
#ifdef ZAYA_Q8_X86
      if (vnni) {
        quantize_pair_vnni(x, nb, dst);
        continue;
      }
#endif
      quantize_pair_portable(x, nb, dst);
    }
  (void)vnni;
}

void matvec_q8_rows(const uint8_t* w, int64_t r0, int64_t r1, const Q8Activations& xq, float* y, int64_t ldy,
                    bool accumulate) {
  if (r0 >= r1 || xq.tokens() <= 0) return;
  if (xq.in() == 0) {
    for (int64_t t = 0; t < xq.tokens(); ++t)
      for (int64_t r = r0; r < r1; ++r)
        if (!accumulate) y[t * ldy + r] = 0;
    return;
  }
#ifdef ZAYA_Q8_X86
  if (cpu_has_vnni()) {
    rows_vnni(w, r0, r1, xq, y, ldy, accumulate);
    return;
  }
  if (cpu_has_avx2()) {
    rows_avx2(w, r0, r1, xq, y, ldy, accumulate);
    return;
  }
#endif
  rows_portable(w, r0, r1, xq, y, ldy, accumulate);
}

bool matvec_q8_has_avx2() { return cpu_has_avx2(); }

void matvec_q8_rows_avx2(const uint8_t* w, int64_t r0, int64_t r1, const Q8Activations& xq, float* y, int64_t ldy,
                         bool accumulate) {
  ZAYA_ASSERT(cpu_has_avx2());
  if (r0 >= r1 || xq.tokens() <= 0) return;
#ifdef ZAYA_Q8_X86
  rows_avx2(w, r0, r1, xq, y, ldy, accumulate);
#endif
}

void matvec_q8_rows_portable(const uint8_t* w, int64_t r0, int64_t r1, const Q8Activations& xq, float* y, int64_t ldy,
                             bool accumulate) {
  if (r0 >= r1 || xq.tokens() <= 0) return;
  rows_portable(w, r0, r1, xq, y, ldy, accumulate);
}

void matvec_q8(const uint8_t* w, int64_t out, const Q8Activations& xq, float* y, int64_t ldy, bool accumulate) {
  const int threads = omp_get_max_threads();
  if (threads <= 1 || out * xq.in() * xq.tokens() < kMatvecParallelMinMacs) {
    matvec_q8_rows(w, 0, out, xq, y, ldy, accumulate);
    return;
  }
  const int64_t piece = matvec_piece_rows(out, threads);
  pool_for((out + piece - 1) / piece, threads, [&](int64_t i, int) {
    matvec_q8_rows(w, i * piece, std::min(out, (i + 1) * piece), xq, y, ldy, accumulate);
  });
}

void matvec_q8_reference(const uint8_t* w, int64_t out, const Q8Activations& xq, float* y, int64_t ldy,
                         bool accumulate) {
  const int64_t blocks = xq.in() / kQ8Block, row_bytes = q8_0_row_bytes(xq.in());
  for (int64_t t = 0; t < xq.tokens(); ++t)
    for (int64_t r = 0; r < out; ++r) {
      double s = 0;
      for (int64_t b = 0; b < blocks; ++b) {
        const uint8_t* row = w + r * row_bytes;  // split layout (core/q8_0.h)
        int64_t dot = 0;
        for (int64_t i = 0; i < 32; ++i) dot += int64_t(int8_t(row[32 * b + i])) * xq.value(t, 32 * b + i);
        uint16_t h;
        std::memcpy(&h, row + xq.in() + 2 * b, 2);
        s += double(f16_to_float(h)) * double(xq.scale(t, b)) * double(dot);
      }
      float* dst = y + t * ldy + r;
      *dst = accumulate ? float(double(*dst) + s) : float(s);
    }
}

const char* matvec_q8_kernel_name() { return cpu_has_vnni() ? "vnni" : cpu_has_avx2() ? "avx2" : "portable"; }

}  // namespace zaya
