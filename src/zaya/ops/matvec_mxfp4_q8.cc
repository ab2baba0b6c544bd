#include "zaya/ops/matvec_mxfp4_q8.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

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

// The VNNI kernel takes a row 16 blocks (512 weights, 272 bytes) at a time,
// a "group", in the packed layout as stored (core/mxfp4.h): each 64-byte load
// holds 4 blocks, byte k the codes of elements 2k (low nibble) and 2k + 1
// (high), so vpdpbusd lane l (bytes 4l .. 4l + 3) always falls in block l / 4.
// The activations are rearranged to match once per call (mxq8_prepare): per
// 4 blocks, their even elements (`lo`, against the low nibbles) and odd ones
// (`hi`), and per block the correction -128 x (the block's sum), since the
// weights enter vpdpbusd unsigned (128 + 2 e2m1, through a vpshufb table).
// Per load: an and, a shift and an and, two vpshufb, two vpdpbusd per token;
// the 4 loads' lanes are then summed in integers into the group's 16 exact
// block dots (lane 4L + v: block 4v + L, mxq8_sum_quads), corrected, converted
// once and multiplied by the 16 products dw x dx in the same order (each
// dx x 2^(u - 128) by one vscalefps: the product's one rounding; one FMA per group,
// row and token, where the previous kernel took a conversion, a permute, a
// multiply and an FMA per 2 blocks). The 16 float lanes are summed in a fixed
// tree (mxq8_sum_lanes, mxq8_sum_lanes4), the same for a row in a tile of any
// size, so the rows' bits do not depend on how the rows are split.
struct alignas(64) Mxq8Quad {
  int8_t lo[64];  // elements 2k of the 4 blocks' 128 (k = 0 .. 63)
  int8_t hi[64];  // elements 2k + 1
};
struct alignas(64) Mxq8Group {
  Mxq8Quad quad[4];  // blocks 4v .. 4v + 3 of the group (zeros past the row's end)
  int32_t corr[16];  // lane 4L + v: -128 x the sum of block 4v + L's 32 values (0 past the row's end)
  float d[16];       // lane 4L + v: the scale dx of block 4v + L (0 past the row's end)
};

// Byte i <- byte 4 (i % 4) + i / 4: the group's 16 scale bytes in the order of mxq8_sum_quads's lanes.
constexpr int8_t kMxq8LaneOrder[16] = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};

int64_t mxq8_groups(int64_t in) { return (in / kMxBlock + 15) / 16; }

// Lane 4L + v of the result: the sum of lanes 4L .. 4L + 3 of q[v] (exact integers).
ZAYA_TARGET_MXQ8_VNNI inline __m512i mxq8_sum_quads(__m512i q0, __m512i q1, __m512i q2, __m512i q3) {
  const __m512i t0 = _mm512_add_epi32(_mm512_unpacklo_epi32(q0, q1), _mm512_unpackhi_epi32(q0, q1));
  const __m512i t1 = _mm512_add_epi32(_mm512_unpacklo_epi32(q2, q3), _mm512_unpackhi_epi32(q2, q3));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(t0, t1), _mm512_unpackhi_epi64(t0, t1));
}

// xq's rows rearranged into groups (mxq8_groups(in) per token) in `buf`.
ZAYA_TARGET_MXQ8_VNNI void mxq8_prepare(const Q8Activations& xq, std::vector<Mxq8Group>& buf) {
  const int64_t blocks = xq.in() / kMxBlock, groups = mxq8_groups(xq.in()), pairs = xq.pairs();
  buf.resize(size_t(groups * xq.tokens()));
  const __m512i offset = _mm512_set1_epi8(char(128));
  for (int64_t t = 0; t < xq.tokens(); ++t) {
    const Q8ActivationPair* xp = xq.row(t);
    for (int64_t g = 0; g < groups; ++g) {
      Mxq8Group& dst = buf[size_t(t * groups + g)];
      __m512i sums[4];
      for (int v = 0; v < 4; ++v) {
        const int64_t p = 8 * g + 2 * v;  // the quad's two pairs (the last pair's second block is zeros)
        const __m512i a = p < pairs ? _mm512_load_si512(xp[p].q) : _mm512_setzero_si512();
        const __m512i b = p + 1 < pairs ? _mm512_load_si512(xp[p + 1].q) : _mm512_setzero_si512();
        const __m512i lo =
            _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi16_epi8(a)), _mm512_cvtepi16_epi8(b), 1);
        const __m512i hi = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi16_epi8(_mm512_srli_epi16(a, 8))),
                                              _mm512_cvtepi16_epi8(_mm512_srli_epi16(b, 8)), 1);
        _mm512_store_si512(dst.quad[v].lo, lo);
        _mm512_store_si512(dst.quad[v].hi, hi);
        sums[v] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), offset, lo), offset, hi);
      }
      _mm512_store_si512(dst.corr,
                         _mm512_sub_epi32(_mm512_setzero_si512(), mxq8_sum_quads(sums[0], sums[1], sums[2], sums[3])));
      for (int i = 0; i < 16; ++i) {
        const int64_t b = 16 * g + kMxq8LaneOrder[i];
        dst.d[i] = b < blocks ? xq.scale(t, b) : 0.0f;
      }
    }
  }
}

// The sum of a's 16 lanes in the tree ((x0 + x2) + (x1 + x3)) per 128-bit part, then (P0 + P1) + (P2 + P3).
ZAYA_TARGET_MXQ8_VNNI inline float mxq8_sum_lanes(__m512 a) {
  const __m512 s1 = _mm512_add_ps(a, _mm512_permute_ps(a, 0x4E));
  const __m512 s2 = _mm512_add_ps(s1, _mm512_permute_ps(s1, 0xB1));
  const __m512 s3 = _mm512_add_ps(s2, _mm512_shuffle_f32x4(s2, s2, 0xB1));
  const __m512 s4 = _mm512_add_ps(s3, _mm512_shuffle_f32x4(s3, s3, 0x4E));
  return _mm512_cvtss_f32(s4);
}

// mxq8_sum_lanes of a0 .. a3 at once (the same additions, so the same bits), in lanes 0-3.
ZAYA_TARGET_MXQ8_VNNI inline __m128 mxq8_sum_lanes4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
  const __m512 t0 = _mm512_add_ps(_mm512_unpacklo_ps(a0, a1), _mm512_unpackhi_ps(a0, a1));
  const __m512 t1 = _mm512_add_ps(_mm512_unpacklo_ps(a2, a3), _mm512_unpackhi_ps(a2, a3));
  const __m512d t0d = _mm512_castps_pd(t0), t1d = _mm512_castps_pd(t1);
  const __m512 u =
      _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(t0d, t1d)), _mm512_castpd_ps(_mm512_unpackhi_pd(t0d, t1d)));
  const __m512 s3 = _mm512_add_ps(u, _mm512_shuffle_f32x4(u, u, 0xB1));
  const __m512 s4 = _mm512_add_ps(s3, _mm512_shuffle_f32x4(s3, s3, 0x4E));
  return _mm512_castps512_ps128(s4);
}

// One group of R rows x TT tokens: the kQuads loads of each row (kPartial, where the row ends inside the group:
// the last load masked to tail_mask, the loads past it zeros; the 16 bytes that end with the row's last scale
// loaded, at scale_offset, and picked by scale_pick), the block dots, and acc += dot x dw x dx.
template <int R, int TT, int kQuads, bool kPartial>
ZAYA_TARGET_MXQ8_VNNI __attribute__((always_inline)) inline void mxq8_group_vnni(
    const uint8_t* w, int64_t row_bytes, int64_t scale_offset, const Mxq8Group* const* x, __mmask64 tail_mask,
    __m128i scale_pick, __m512 (&acc)[R][TT]) {
  const __m512i table = _mm512_broadcast_i32x4(
      _mm_setr_epi8(char(128), char(129), char(130), char(131), char(132), char(134), char(136), char(140), char(128),
                    char(127), char(126), char(125), char(124), char(122), char(120), char(116)));
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m128i order = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kMxq8LaneOrder));
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const uint8_t* q = w + r * row_bytes;
    __m512i dots[TT][4];
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      if (v >= kQuads) {
        for (int t = 0; t < TT; ++t) dots[t][v] = _mm512_setzero_si512();
        continue;
      }
      const __m512i packed =
          kPartial && v == kQuads - 1 ? _mm512_maskz_loadu_epi8(tail_mask, q + 64 * v) : _mm512_loadu_si512(q + 64 * v);
      const __m512i wl = _mm512_shuffle_epi8(table, _mm512_and_si512(packed, low4));
      const __m512i wh = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(packed, 4), low4));
      for (int t = 0; t < TT; ++t) {
        const Mxq8Quad& xv = x[t]->quad[v];
        dots[t][v] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), wl, _mm512_load_si512(xv.lo)), wh,
                                         _mm512_load_si512(xv.hi));
      }
    }
    // u - 128 in the lanes' order: dw x dx = dx x 2^(u - 128) by vscalefps (the product's one rounding).
    // (Unmasked: a masked byte load here measured slower, and a row's last group loads its row's last 16 bytes.)
    const __m128i u8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + scale_offset));
    const __m512i u = _mm512_cvtepu8_epi32(_mm_shuffle_epi8(u8, kPartial ? scale_pick : order));
    const __m512 e = _mm512_cvtepi32_ps(_mm512_sub_epi32(u, _mm512_set1_epi32(128)));
    for (int t = 0; t < TT; ++t) {
      const __m512i dot = _mm512_add_epi32(mxq8_sum_quads(dots[t][0], dots[t][1], dots[t][2], dots[t][3]),
                                           _mm512_load_si512(x[t]->corr));
      acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_scalef_ps(_mm512_load_ps(x[t]->d), e), acc[r][t]);
    }
  }
}

// R MXFP4 rows x TT tokens (x: the tokens' prepared groups, token t at x + t * x_stride).
template <int R, int TT>
ZAYA_TARGET_MXQ8_VNNI inline void mxq8_tile_vnni(const uint8_t* w, int64_t row_bytes, int64_t in, const Mxq8Group* x,
                                                 int64_t x_stride, float* y, int64_t ldy, bool accumulate) {
  const int64_t blocks = in / kMxBlock, full = blocks / 16;
  __m512 acc[R][TT];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TT; ++t) acc[r][t] = _mm512_setzero_ps();
  // The next tile's rows follow this one's: fetch them one tile ahead, spread over this tile's groups.
  const int64_t spread = (blocks + 15) / 16, chunk = (R * row_bytes + spread - 1) / spread;
  const uint8_t* next = w + R * row_bytes;
  const Mxq8Group* xg[TT];
  for (int64_t g = 0; g < full; ++g) {
    for (int64_t l = 0; l < chunk; l += 64)
      _mm_prefetch(reinterpret_cast<const char*>(next + g * chunk + l), _MM_HINT_T0);
    for (int t = 0; t < TT; ++t) xg[t] = x + t * x_stride + g;
    mxq8_group_vnni<R, TT, 4, false>(w + 256 * g, row_bytes, in / 2 - 256 * g + 16 * g, xg, 0, _mm_setzero_si128(),
                                     acc);
  }
  if (full * 16 < blocks) {  // the last 1-15 blocks: ceil(left / 4) loads, the last masked to its 16 x (left % 4)
    const int64_t left = blocks - 16 * full;
    for (int64_t l = 0; l < chunk; l += 64)
      _mm_prefetch(reinterpret_cast<const char*>(next + full * chunk + l), _MM_HINT_T0);
    const int quads = int((left + 3) / 4);
    const int64_t tail_bytes = 16 * (left - 4 * (quads - 1));
    const __mmask64 tail_mask = tail_bytes == 64 ? ~__mmask64(0) : (__mmask64(1) << tail_bytes) - 1;
    for (int t = 0; t < TT; ++t) xg[t] = x + t * x_stride + full;
    const uint8_t* wt = w + 256 * full;
    // The row's last `left` scale bytes are the 16 loaded bytes' last: lane i takes byte 16 - left + order[i]
    // (a zero past them: pshufb's index bit 7). A row has at least 16 bytes (16 + 1 at 32 columns).
    const int64_t scale_offset = in / 2 - 256 * full + 16 * full + left - 16;
    // (In vector registers: 16 bytes stored one by one and loaded as a vector stall the load on Zen 5.)
    const __m128i order = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kMxq8LaneOrder));
    const __m128i past = _mm_cmpgt_epi8(order, _mm_set1_epi8(char(left - 1)));
    const __m128i scale_pick = _mm_or_si128(_mm_add_epi8(order, _mm_set1_epi8(char(16 - left))), past);
    switch (quads) {
      case 1: mxq8_group_vnni<R, TT, 1, true>(wt, row_bytes, scale_offset, xg, tail_mask, scale_pick, acc); break;
      case 2: mxq8_group_vnni<R, TT, 2, true>(wt, row_bytes, scale_offset, xg, tail_mask, scale_pick, acc); break;
      case 3: mxq8_group_vnni<R, TT, 3, true>(wt, row_bytes, scale_offset, xg, tail_mask, scale_pick, acc); break;
      default: mxq8_group_vnni<R, TT, 4, true>(wt, row_bytes, scale_offset, xg, tail_mask, scale_pick, acc); break;
    }
  }
  // The sums: 4 at a time where there are 4, else one by one (the same bits either way).
  constexpr int kN = R * TT, kFours = kN / 4 * 4;
  for (int i = 0; i < kFours; i += 4) {
    alignas(16) float s[4];
    _mm_store_ps(s, mxq8_sum_lanes4(acc[i / TT][i % TT], acc[(i + 1) / TT][(i + 1) % TT],
                                    acc[(i + 2) / TT][(i + 2) % TT], acc[(i + 3) / TT][(i + 3) % TT]));
    for (int k = 0; k < 4; ++k) store_mxq8(y + (i + k) % TT * ldy + (i + k) / TT, s[k], accumulate);
  }
  for (int i = kFours; i < kN; ++i)
    store_mxq8(y + i % TT * ldy + i / TT, mxq8_sum_lanes(acc[i / TT][i % TT]), accumulate);
}

template <int TT>
ZAYA_TARGET_MXQ8_VNNI void mxq8_rows_for_tokens_vnni(const uint8_t* w, int64_t row_bytes, int64_t in, int64_t r0,
                                                     int64_t r1, const Mxq8Group* x, int64_t x_stride, float* y,
                                                     int64_t ldy, bool accumulate) {
  constexpr int R = TT == 1 ? 8 : TT == 2 ? 4 : 2;
  int64_t r = r0;
  for (; r + R <= r1; r += R)
    mxq8_tile_vnni<R, TT>(w + r * row_bytes, row_bytes, in, x, x_stride, y + r, ldy, accumulate);
  for (; r < r1; ++r) mxq8_tile_vnni<1, TT>(w + r * row_bytes, row_bytes, in, x, x_stride, y + r, ldy, accumulate);
}

void mxq8_rows_vnni(const uint8_t* w, int64_t r0, int64_t r1, const Q8Activations& xq, float* y, int64_t ldy,
                    bool accumulate) {
  thread_local std::vector<Mxq8Group> prepared;
  mxq8_prepare(xq, prepared);
  const int64_t in = xq.in(), row_bytes = mxfp4_row_bytes(in), stride = mxq8_groups(in);
  for_matvec_blocks(r0, r1, xq.tokens(), [&](auto tt, int64_t rb, int64_t re, int64_t t) {
    mxq8_rows_for_tokens_vnni<decltype(tt)::value>(w, row_bytes, in, rb, re, prepared.data() + t * stride, stride,
                                                   y + t * ldy, ldy, accumulate);
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
