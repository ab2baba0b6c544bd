// Cached attention (cached_attention.h). Over 500 lines for one reason: the
// per-row vector kernels, the rows of a speculative check walked together
// (rows_together) and the sgemm block path share this file's vector helpers
// (Simd, RowPrefetcher, the score and output tiles), which no other file uses.
#include "zaya/infer/cached_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "zaya/core/bf16.h"
#include "zaya/core/error.h"
#include "zaya/core/exp_f32.h"
#include "zaya/core/work_pool.h"
#include "zaya/ops/dot_widened.h"
#include "zaya/ops/matmul.h"
#include "zaya/ops/row_max.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#define ZAYA_ATTN_SIMD 1
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define ZAYA_ATTN_SIMD 1
#endif

namespace zaya {
namespace {

constexpr int64_t kDecodeRows = 4;   // chunks up to this many queries take the per-row path
constexpr int64_t kQueryBlock = 64;  // query rows per sgemm block

struct Task {
  int32_t chunk;
  int32_t head;  // KV head (row path) or query head (block path)
  int64_t row0;  // first query row of the block (block path), -1 for the row path
};

// f(p) with p typed as the span's element type.
template <typename F>
void with_elements(const void* p, bool bf16, F&& f) {
  if (bf16)
    f(static_cast<const uint16_t*>(p));
  else
    f(static_cast<const float*>(p));
}

// Softmax of p[0..n) in place; returns nothing (the row sums to 1). The
// exponential is exp_f32 (core/exp_f32.h), as in the training softmaxes: it
// vectorises with the loop, where std::exp is one libm call per key.
inline void softmax_inplace(float* p, int64_t n) {
  const float mx = row_max(p, n);
  float sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) {
    p[i] = exp_f32(p[i] - mx);
    sum += p[i];
  }
  const float inv = 1.0f / sum;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) p[i] *= inv;
}

// f(k, v, bf16, row_stride, n, offset) for each piece of the chunk's spans
// that holds positions [lo, hi) (offset: the piece's first position - lo), for
// KV head j; k and v point at elements of the span's type (bf16 or f32).
template <typename F>
void for_each_piece(const CachedAttentionChunk& ch, int64_t j, int64_t lo, int64_t hi, F&& f) {
  for (int32_t si = 0; si < ch.span_count; ++si) {
    const CachedKeySpan& sp = ch.spans[si];
    const int64_t a = std::max(lo, sp.first), b = std::min(hi, sp.first + sp.count);
    if (a >= b) continue;
    const int64_t at = (j * sp.head_stride + (a - sp.first) * sp.row_stride) * (sp.bf16 ? 2 : 4);
    f(static_cast<const char*>(sp.k) + at, static_cast<const char*>(sp.v) + at, sp.bf16, sp.row_stride, b - a, a - lo);
  }
}

#ifdef ZAYA_ATTN_SIMD
// The vector operations the per-row kernels below are written in, for the
// widest unit the build targets: AVX-512 (16 floats) or AVX2 with FMA (8).
// A cache element becomes a float exactly (bf16: the top half of a float32),
// so a bf16 cache gives the bits of an f32 cache of its values.
//
// Both kernels read a key or value row's elements a pair of vectors (2 kW
// elements) at a time in even / odd order (load_even_odd: lane l of the first
// vector holds element 2l, of the second element 2l + 1): one load and two
// bit operations widen 2 kW bf16 elements (a bf16 pair is one 32-bit lane:
// shifted left 16, or masked to its top half), where widening in order takes
// two loads, two zero-extending shuffles and two shifts. An f32 row is put in
// the same order by two permutes (the sums must not depend on a span's type).
// Which lane holds an output element leaves its FMA chain alone; a score's
// lanes are summed, so the order sets which elements share a lane (the
// queries are put in the same order once per row, permute_queries).
#if defined(__AVX512F__)
struct Simd {
  using V = __m512;
  static constexpr int kWidth = 16;
  static constexpr int kHeadsPerTile = 4;  // output_tile: up to 4 heads x 4 vectors of accumulators (32 registers)
  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static V load(const uint16_t* p) {
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
  }
  static void load_even_odd(const uint16_t* p, V& even, V& odd) {
    const __m512i x = _mm512_loadu_si512(p);
    even = _mm512_castsi512_ps(_mm512_slli_epi32(x, 16));
    odd = _mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32(int32_t(0xFFFF0000u))));
  }
  static void load_even_odd(const float* p, V& even, V& odd) {
    const V a = load(p), b = load(p + kWidth);
    even = _mm512_permutex2var_ps(a, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), b);
    odd = _mm512_permutex2var_ps(a, _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31), b);
  }
  // p[0, 2 kW) from the even and odd elements: load_even_odd's inverse.
  static void store_even_odd(float* p, V even, V odd) {
    store(p,
          _mm512_permutex2var_ps(even, _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23), odd));
    store(p + kWidth, _mm512_permutex2var_ps(
                          even, _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31), odd));
  }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static void store(float* p, V a) { _mm512_storeu_ps(p, a); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  // Lane 4k + m of the result holds the lane sum of a[k + off(m)] (off = 0,
  // 8, 4, 12 for m = 0 .. 3; see sums_slot), each in _mm512_reduce_add_ps's
  // tree (the 256-bit halves, the 128-bit quarters, elements {2, 3} onto
  // {0, 1}, then 1 onto 0): 19 shuffles, 12 blends and 15 adds for the 16
  // sums, where one at a time takes 4 shuffles and 4 adds each.
  static V sums(const V (&a)[16]) {
    V b[8], c[4], e[2];
    for (int p = 0; p < 8; ++p)  // lanes 0-7: a[2p]'s halves summed, 8-15: a[2p + 1]'s
      b[p] = _mm512_add_ps(_mm512_mask_blend_ps(0xFF00, a[2 * p], a[2 * p + 1]),
                           _mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], 0x4E));
    for (int p = 0; p < 4; ++p)  // quarter k: a[4p + k]'s quarters summed
      c[p] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * p], b[2 * p + 1], 0x88),
                           _mm512_shuffle_f32x4(b[2 * p], b[2 * p + 1], 0xDD));
    for (int p = 0; p < 2; ++p)  // quarter k: a[8p + k]'s pairs summed (lanes 0, 1), a[8p + 4 + k]'s (2, 3)
      e[p] = _mm512_add_ps(_mm512_mask_blend_ps(0xCCCC, c[2 * p], c[2 * p + 1]),
                           _mm512_shuffle_ps(c[2 * p], c[2 * p + 1], 0x4E));
    // quarter k: a[k], a[8 + k], a[4 + k], a[12 + k]
    return _mm512_add_ps(_mm512_mask_blend_ps(0xAAAA, e[0], e[1]),
                         _mm512_permute_ps(_mm512_mask_blend_ps(0x5555, e[0], e[1]), 0xB1));
  }
};
#else
struct Simd {
  using V = __m256;
  static constexpr int kWidth = 8;
  static constexpr int kHeadsPerTile = 2;  // output_tile: up to 2 heads x 4 vectors of accumulators (16 registers)
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V load(const uint16_t* p) {
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
  }
  static void load_even_odd(const uint16_t* p, V& even, V& odd) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    even = _mm256_castsi256_ps(_mm256_slli_epi32(x, 16));
    odd = _mm256_castsi256_ps(_mm256_and_si256(x, _mm256_set1_epi32(int32_t(0xFFFF0000u))));
  }
  // Within each 128-bit half: a0 a2 b0 b2 | a4 a6 b4 b6; then the 64-bit quarters in order 0, 2, 1, 3.
  static void load_even_odd(const float* p, V& even, V& odd) {
    const V a = load(p), b = load(p + kWidth);
    even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
    odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
  }
  static void store_even_odd(float* p, V even, V odd) {
    const V lo = _mm256_unpacklo_ps(even, odd), hi = _mm256_unpackhi_ps(even, odd);
    store(p, _mm256_permute2f128_ps(lo, hi, 0x20));
    store(p + kWidth, _mm256_permute2f128_ps(lo, hi, 0x31));
  }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static void store(float* p, V a) { _mm256_storeu_ps(p, a); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  // Lane 4k + m of the result holds the lane sum of a[k + off(m)] (off = 0,
  // 4, 2, 6 for m = 0 .. 3; see sums_slot), each in one tree: the 128-bit
  // halves, elements {2, 3} onto {0, 1}, then 1 onto 0.
  static V sums(const V (&a)[8]) {
    V b[4], c[2];
    for (int p = 0; p < 4; ++p)  // lanes 0-3: a[2p]'s halves summed, 4-7: a[2p + 1]'s
      b[p] = _mm256_add_ps(_mm256_blend_ps(a[2 * p], a[2 * p + 1], 0xF0),
                           _mm256_permute2f128_ps(a[2 * p], a[2 * p + 1], 0x21));
    for (int p = 0; p < 2; ++p)  // half k: a[4p + k]'s pairs summed (lanes 0, 1), a[4p + 2 + k]'s (2, 3)
      c[p] =
          _mm256_add_ps(_mm256_blend_ps(b[2 * p], b[2 * p + 1], 0xCC), _mm256_shuffle_ps(b[2 * p], b[2 * p + 1], 0x4E));
    // half k: a[k], a[4 + k], a[2 + k], a[6 + k]
    return _mm256_add_ps(_mm256_blend_ps(c[0], c[1], 0xAA), _mm256_permute_ps(_mm256_blend_ps(c[0], c[1], 0x55), 0xB1));
  }
};
#endif
constexpr int64_t kW = Simd::kWidth;

// Vectors [0, NV) of a value row of NV kW elements in output_run's order:
// pairs in even / odd order, a last unpaired vector (NV odd) in element order.
template <int NV, typename E>
inline void load_row(const E* r, Simd::V* out) {
  for (int v = 0; v + 1 < NV; v += 2) Simd::load_even_odd(r + kW * v, out[v], out[v + 1]);
  if constexpr (NV % 2 == 1) out[NV - 1] = Simd::load(r + kW * (NV - 1));
}

// Fetches towards L1, ahead of the reads, the rows of KV head j at positions
// [lo, hi) of a chunk, in the order rows_task reads them: the keys, then the
// values; to(rows) has rows [0, rows) of that sequence (keys: row i is
// position lo + i, values: row keys + i) fetched. A cache page holds only
// page_tokens rows of one head (2 KB at 16 positions and head_dim 64 in
// bf16), at which the hardware prefetcher stops; this runs across pages.
class RowPrefetcher {
 public:
  // Rows fetched ahead of the row being read (measured on `small` at context 1,024: 48 beat 16, 32 and 96), and
  // the rows fetched per call that fetches (one cache page at page_tokens 16: per row, the calls cost more).
  static constexpr int64_t kAhead = 48;
  static constexpr int64_t kBatch = 16;

  RowPrefetcher(const CachedAttentionChunk& ch, int64_t j, int64_t lo, int64_t hi, int64_t d)
      : ch_(ch), j_(j), lo_(lo), hi_(hi), d_(d), pos_(lo) {
    seek();
  }
  // Inlined into the kernels' loops: one compare per row read, a call per kBatch rows.
  __attribute__((always_inline)) void to(int64_t rows) {
    if (fetched_ < rows) fetch_to(rows);
  }

 private:
  __attribute__((noinline)) void fetch_to(int64_t rows) {
    const int64_t target = rows + kBatch;  // a batch at a time: one call per kBatch rows read
    while (fetched_ < target && span_ < ch_.span_count) fetch_run(target - fetched_);
  }
  void seek() {
    while (span_ < ch_.span_count && ch_.spans[span_].first + ch_.spans[span_].count <= pos_) ++span_;
  }
  // Up to `most` rows, within one span.
  void fetch_run(int64_t most) {
    const CachedKeySpan& sp = ch_.spans[span_];
    const int64_t es = sp.bf16 ? 2 : 4, n = std::min({most, sp.first + sp.count - pos_, hi_ - pos_});
    const char* first = static_cast<const char*>(values_ ? sp.v : sp.k) +
                        (j_ * sp.head_stride + (pos_ - sp.first) * sp.row_stride) * es;
    const uintptr_t end = reinterpret_cast<uintptr_t>(first) + ((n - 1) * sp.row_stride + d_) * es;
    for (uintptr_t a = reinterpret_cast<uintptr_t>(first) & ~uintptr_t(63); a < end; a += 64)
      _mm_prefetch(reinterpret_cast<const char*>(a), _MM_HINT_T0);
    fetched_ += n;
    pos_ += n;
    if (pos_ == hi_) {
      if (values_) {
        span_ = ch_.span_count;  // done
        return;
      }
      values_ = true;
      pos_ = lo_;
      span_ = 0;
    }
    seek();
  }

  const CachedAttentionChunk& ch_;
  int64_t j_, lo_, hi_, d_;
  int64_t pos_, fetched_ = 0;
  int32_t span_ = 0;
  bool values_ = false;
};

// Slot of dot product i (of kW) in Simd::sums' input, chosen so that lane i
// of its output holds dot product i: sums leaves lane 4k + m holding input
// k + kW/2, kW/4, 3kW/4 (m = 1, 2, 3) or k (m = 0).
constexpr int sums_slot(int i) {
  constexpr int off[4] = {0, int(kW) / 2, int(kW) / 4, 3 * int(kW) / 4};
  return i / 4 + off[i % 4];
}

// The queries of G heads (d floats each) in load_row's order, for the scores.
void permute_queries(const float* q, int64_t d, int64_t G, float* out) {
  const int64_t nv = d / kW;
  for (int64_t g = 0; g < G; ++g) {
    const float* qg = q + g * d;
    float* og = out + g * d;
    int64_t v = 0;
    for (; v + 1 < nv; v += 2) {
      Simd::V even, odd;
      Simd::load_even_odd(qg + kW * v, even, odd);
      Simd::store(og + kW * v, even);
      Simd::store(og + kW * (v + 1), odd);
    }
    if (v < nv) Simd::store(og + kW * v, Simd::load(qg + kW * v));
  }
}

// The kW dot products of GB query heads (rows of qp, in load_row's order) with
// KB = kW / GB key rows, nv vectors each; lane g KB + i of the result is head
// g's with key i. Each is one FMA chain over the vectors in load_row's order
// (even / odd pairs: one load and two bit operations widen a bf16 pair of
// vectors, as in the output pass), its lanes summed in one tree, all kW
// at once (Simd::sums): the same bits for a dot product whichever tile, heads
// or keys shared it.
template <int GB, typename E>
__attribute__((always_inline)) inline Simd::V score_tile(const float* const (&qh)[GB], const E* const (&kr)[kW / GB],
                                                         int64_t nv) {
  constexpr int KB = int(kW) / GB;
  Simd::V acc[kW];
  for (int i = 0; i < int(kW); ++i) acc[i] = Simd::zero();
  int64_t v = 0;
  for (; v + 1 < nv; v += 2) {
    for (int i = 0; i < KB; ++i) {
      Simd::V even, odd;
      Simd::load_even_odd(kr[i] + kW * v, even, odd);
      for (int g = 0; g < GB; ++g) {
        Simd::V& a = acc[sums_slot(g * KB + i)];
        a = Simd::fmadd(Simd::load(qh[g] + kW * v), even, a);
        a = Simd::fmadd(Simd::load(qh[g] + kW * (v + 1)), odd, a);
      }
    }
  }
  if (v < nv) {
    for (int i = 0; i < KB; ++i) {
      const Simd::V k = Simd::load(kr[i] + kW * v);
      for (int g = 0; g < GB; ++g) {
        Simd::V& a = acc[sums_slot(g * KB + i)];
        a = Simd::fmadd(Simd::load(qh[g] + kW * v), k, a);
      }
    }
  }
  return Simd::sums(acc);
}

// scores[g * lds + t] = scale * q_g . k_t for the G heads of one KV head (qp:
// their queries, permute_queries' order), n keys ldk elements apart (d % kW
// == 0), in tiles of GB heads x kW / GB keys (score_tile): each key row comes
// from memory once per tile of heads and is widened once for all its heads,
// one horizontal pass sums kW dot products. A tile past the last head or key
// repeats the last one (its sums are not stored). Key t is row row0 + t of
// `ahead`.
template <int GB, typename E>
void scores_heads(const float* qp, const E* kc, int64_t ldk, int64_t d, int64_t G, int64_t n, float scale,
                  float* scores, int64_t lds, RowPrefetcher& ahead, int64_t row0) {
  constexpr int KB = int(kW) / GB;
  const int64_t nv = d / kW;
  const Simd::V s = Simd::set1(scale);
  alignas(64) float tile[kW];
  for (int64_t g0 = 0; g0 < G; g0 += GB) {
    const int64_t gn = std::min<int64_t>(GB, G - g0);
    const float* qh[GB];
    for (int g = 0; g < GB; ++g) qh[g] = qp + (g0 + std::min<int64_t>(g, gn - 1)) * d;
    for (int64_t t = 0; t < n; t += KB) {
      if (g0 == 0) ahead.to(row0 + t + KB + RowPrefetcher::kAhead);  // the first tile of heads prefetches
      const int64_t kn = std::min<int64_t>(KB, n - t);
      const E* kr[KB];
      for (int i = 0; i < KB; ++i) kr[i] = kc + (t + std::min<int64_t>(i, kn - 1)) * ldk;
      Simd::store(tile, Simd::mul(s, score_tile<GB>(qh, kr, nv)));
      for (int64_t g = 0; g < gn; ++g) {
        float* out = scores + (g0 + g) * lds + t;
        if (kn == KB)  // a whole tile: a copy of constant size, inlined (the variable one is a call)
          std::memcpy(out, tile + g * KB, sizeof(float) * KB);
        else
          std::memcpy(out, tile + g * KB, sizeof(float) * kn);
      }
    }
  }
}

// scores_heads in the widest tile of heads that G fills (up to 8: ZAYA1-8B's
// group), the heads left over in the widest tiles they fill (18 heads: 8, 8,
// then a tile of 2, not a third tile of 8 that repeats one head 6 times).
template <typename E>
void scores_simd(const float* qp, const E* kc, int64_t ldk, int64_t d, int64_t G, int64_t n, float scale, float* scores,
                 int64_t lds, RowPrefetcher& ahead, int64_t row0) {
  for (int64_t g0 = 0; g0 < G;) {
    const int64_t left = G - g0, gb = left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
    const int64_t heads = gb == 8 ? left / 8 * 8 : gb;
    const float* q = qp + g0 * d;
    float* out = scores + g0 * lds;
    if (gb == 8)
      scores_heads<8>(q, kc, ldk, d, heads, n, scale, out, lds, ahead, row0);
    else if (gb == 4)
      scores_heads<4>(q, kc, ldk, d, heads, n, scale, out, lds, ahead, row0);
    else if (gb == 2)
      scores_heads<2>(q, kc, ldk, d, heads, n, scale, out, lds, ahead, row0);
    else
      scores_heads<1>(q, kc, ldk, d, heads, n, scale, out, lds, ahead, row0);
    g0 += heads;
  }
}

// acc[g][v] += sum_t p[g][t] v_t[c0 + ...] over n values ldv elements apart,
// the value rows' vectors in load_row's order (so acc is too).
template <int GN, int NV, typename E>
__attribute__((always_inline)) inline void output_run(Simd::V (&acc)[GN][NV], const float* const* p, int64_t off,
                                                      int64_t n, const E* vc, int64_t ldv, int64_t c0,
                                                      RowPrefetcher* ahead, int64_t row0) {
  Simd::V r[GN][NV];    // a local copy: GCC keeps it in registers, where it stores acc (a reference) every row
  const float* pr[GN];  // local too: the prefetcher's call cannot change them
  for (int g = 0; g < GN; ++g) {
    pr[g] = p[g] + off;
    for (int v = 0; v < NV; ++v) r[g][v] = acc[g][v];
  }
  for (int64_t t = 0; t < n; ++t) {
    if (ahead != nullptr) ahead->to(row0 + t + 1 + RowPrefetcher::kAhead);
    Simd::V vv[NV];
    load_row<NV>(vc + t * ldv + c0, vv);
    for (int g = 0; g < GN; ++g) {
      const Simd::V pg = Simd::set1(pr[g][t]);
      for (int v = 0; v < NV; ++v) r[g][v] = Simd::fmadd(pg, vv[v], r[g][v]);
    }
  }
  for (int g = 0; g < GN; ++g)
    for (int v = 0; v < NV; ++v) acc[g][v] = r[g][v];
}

// o[g][c0 .. c0 + kW NV) = sum_t p[g][t] v_t for GN heads over every key
// position [lo, hi) of the chunk's spans (KV head j), accumulated in
// registers across the spans (compile-time sizes keep the accumulators out of
// memory). p is the softmax, normalised first as in prefill's block_task (a
// position's output must not depend on which path computed it: a chunk's
// rows take either by its length, and forks and unforked prompts are chunked
// differently, generator_fork_test.cc). Each output element is
// one chain of FMAs over the keys in order, whatever lane holds it, so the
// spans' split and element types leave its bits alone. Value t is row
// keys + t of `ahead` (nullptr: no prefetching).
template <int GN, int NV>
void output_tile(const float* const* p, const CachedAttentionChunk& ch, int64_t j, int64_t lo, int64_t hi, int64_t c0,
                 float* const* o, RowPrefetcher* ahead) {
  Simd::V acc[GN][NV];
  for (int g = 0; g < GN; ++g)
    for (int v = 0; v < NV; ++v) acc[g][v] = Simd::zero();
  const int64_t keys = hi - lo;
  for (int32_t si = 0; si < ch.span_count; ++si) {
    const CachedKeySpan& sp = ch.spans[si];
    const int64_t a = std::max(lo, sp.first), b = std::min(hi, sp.first + sp.count);
    if (a >= b) continue;
    const int64_t at = j * sp.head_stride + (a - sp.first) * sp.row_stride, off = a - lo;
    if (sp.bf16)
      output_run<GN, NV>(acc, p, off, b - a, static_cast<const uint16_t*>(sp.v) + at, sp.row_stride, c0, ahead,
                         keys + off);
    else
      output_run<GN, NV>(acc, p, off, b - a, static_cast<const float*>(sp.v) + at, sp.row_stride, c0, ahead,
                         keys + off);
  }
  for (int g = 0; g < GN; ++g) {
    float* og = o[g] + c0;
    for (int v = 0; v + 1 < NV; v += 2) Simd::store_even_odd(og + kW * v, acc[g][v], acc[g][v + 1]);
    if constexpr (NV % 2 == 1) Simd::store(og + kW * (NV - 1), acc[g][NV - 1]);
  }
}

template <int GN>
void output_heads(const float* const* p, const CachedAttentionChunk& ch, int64_t j, int64_t lo, int64_t hi, int64_t d,
                  float* const* o, RowPrefetcher* ahead) {
  for (int64_t c0 = 0; c0 < d; c0 += 4 * kW) {
    RowPrefetcher* a = c0 == 0 ? ahead : nullptr;  // the first column tile prefetches
    switch (std::min<int64_t>(4, (d - c0) / kW)) {
      case 1: output_tile<GN, 1>(p, ch, j, lo, hi, c0, o, a); break;
      case 2: output_tile<GN, 2>(p, ch, j, lo, hi, c0, o, a); break;
      case 3: output_tile<GN, 3>(p, ch, j, lo, hi, c0, o, a); break;
      default: output_tile<GN, 4>(p, ch, j, lo, hi, c0, o, a); break;
    }
  }
}

// o[h] = sum_t p[h][t] v_t for n heads (p[h]: a softmax over the keys [lo,
// hi) of KV head j; o[h]: d floats), kHeadsPerTile heads at a time (each V
// row is read once per tile of heads and 4 kW output floats); d % kW == 0.
// The heads may be one row's G (rows_task) or several rows' (rows_together).
void output_simd(const float* const* p, float* const* o, int64_t n, const CachedAttentionChunk& ch, int64_t j,
                 int64_t lo, int64_t hi, int64_t d, RowPrefetcher* ahead) {
  for (int64_t h0 = 0; h0 < n; h0 += Simd::kHeadsPerTile) {
    const float* const* ph = p + h0;
    float* const* oh = o + h0;
    const int64_t gn = std::min<int64_t>(Simd::kHeadsPerTile, n - h0);
    RowPrefetcher* a = h0 == 0 ? ahead : nullptr;  // the first tile of heads prefetches
    if constexpr (Simd::kHeadsPerTile == 4) {
      if (gn == 4) {
        output_heads<4>(ph, ch, j, lo, hi, d, oh, a);
        continue;
      }
      if (gn == 3) {
        output_heads<3>(ph, ch, j, lo, hi, d, oh, a);
        continue;
      }
    }
    if (gn == 2)
      output_heads<2>(ph, ch, j, lo, hi, d, oh, a);
    else
      output_heads<1>(ph, ch, j, lo, hi, d, oh, a);
  }
}

// The pointers output_simd takes, per thread (reused: no allocation per step).
struct HeadPointers {
  std::vector<const float*> p;
  std::vector<float*> o;
  void resize(int64_t n) {
    p.resize(size_t(n));
    o.resize(size_t(n));
  }
};

// Rows of a chunk (speculative verification: rows_task) that share their
// first key (full attention, or a window the chunk has not yet passed) in
// groups that walk the keys together, each row with the bits it has alone:
// the G heads of R rows are R G "heads" of scores_simd (a score's bits do
// not depend on the tile that computed it), so each key row is read from the
// cache once per group instead of once per row; each row's softmax runs on
// its own keys at the address rows_task gives it (scratch, head-major); the
// output pass takes the keys every row of the group sees for all its heads
// at once (output_simd: one FMA chain per output element over the keys in
// order), and each row then continues its chains over the group's later keys
// it sees, one std::fma per element and key (what a vector FMA lane does).
// Returns false (nothing done) where the rows do not share their first key
// or the scratch holds fewer than 2 rows of a group.
bool rows_together(const CachedAttentionChunk& ch, int64_t j, int64_t d, int64_t G, int64_t QW, float scale,
                   float* scratch, int64_t per_thread) {
  const int64_t S = ch.count, lo = cached_attention_first_key(ch.past, ch.window), n = ch.past + S - lo;
  if (S < 2 || cached_attention_first_key(ch.past + S - 1, ch.window) != lo) return false;
  // scratch: [G, keys] a row's softmax (as rows_task's) | [R G, d] queries | [R G, n] scores, then probabilities.
  const int64_t R = std::min(S, (per_thread - G * n) / (G * (d + n)));
  if (R < 2) return false;
  float* qp = scratch + G * n;
  float* sc = qp + R * G * d;
  thread_local HeadPointers heads;
  heads.resize(R * G);
  for (int64_t i0 = 0; i0 < S; i0 += R) {
    const int64_t rows = std::min(R, S - i0), hi = ch.past + i0 + rows, keys = hi - lo;
    const int64_t shared = ch.past + i0 + 1;  // keys [lo, shared): seen by every row of the group
    for (int64_t r = 0; r < rows; ++r) permute_queries(ch.q_SQ + (i0 + r) * QW + j * G * d, d, G, qp + r * G * d);
    RowPrefetcher ahead(ch, j, lo, hi, d);
    for_each_piece(ch, j, lo, hi, [&](const void* kc, const void*, bool bf16, int64_t ld, int64_t m, int64_t off) {
      with_elements(kc, bf16,
                    [&](auto k) { scores_simd(qp, k, ld, d, rows * G, m, scale, sc + off, keys, ahead, off); });
    });
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t seen = ch.past + i0 + r + 1 - lo;  // this row's keys
      for (int64_t g = 0; g < G; ++g) {
        float* row = sc + (r * G + g) * keys;
        std::memcpy(scratch + g * seen, row, sizeof(float) * size_t(seen));
        softmax_inplace(scratch + g * seen, seen);
        std::memcpy(row, scratch + g * seen, sizeof(float) * size_t(seen));
        heads.p[size_t(r * G + g)] = row;
        heads.o[size_t(r * G + g)] = ch.o_SQ + (i0 + r) * QW + (j * G + g) * d;
      }
    }
    output_simd(heads.p.data(), heads.o.data(), rows * G, ch, j, lo, shared, d, &ahead);
    for (int64_t r = 1; r < rows; ++r)
      for (int64_t g = 0; g < G; ++g) {
        const float* pr = heads.p[size_t(r * G + g)];
        float* o = heads.o[size_t(r * G + g)];
        for_each_piece(ch, j, shared, ch.past + i0 + r + 1,
                       [&](const void*, const void* vc, bool bf16, int64_t ld, int64_t m, int64_t off) {
                         with_elements(vc, bf16, [&](auto vs) {
                           for (int64_t t = 0; t < m; ++t) {
                             const float w = pr[shared - lo + off + t];
                             for (int64_t c = 0; c < d; ++c) o[c] = std::fma(w, widen_element(vs[t * ld + c]), o[c]);
                           }
                         });
                       });
      }
  }
  return true;
}

#endif

// Every query row of a short chunk against KV head j, for the G query heads
// that share it (per_thread: the floats of scratch).
void rows_task(const CachedAttentionChunk& ch, const CachedAttentionShape& s, int64_t j, float* scratch,
               int64_t per_thread) {
  const int64_t d = s.head_dim, G = s.q_heads / s.kv_heads, QW = s.q_heads * d;
  const float scale = 1.0f / std::sqrt(float(d));
#ifdef ZAYA_ATTN_SIMD
  if (d % kW == 0 && rows_together(ch, j, d, G, QW, scale, scratch, per_thread)) return;
  thread_local HeadPointers heads;
  heads.resize(G);
#endif
  for (int64_t i = 0; i < ch.count; ++i) {
    const int64_t p = ch.past + i, lo = cached_attention_first_key(p, ch.window), keys = p - lo + 1;
    const float* q = ch.q_SQ + i * QW + j * G * d;
    float* o = ch.o_SQ + i * QW + j * G * d;
#ifdef ZAYA_ATTN_SIMD
    if (d % kW == 0) {
      RowPrefetcher ahead(ch, j, lo, p + 1, d);
      float* qp = scratch + G * keys;  // after the scores
      permute_queries(q, d, G, qp);
      for_each_piece(ch, j, lo, p + 1, [&](const void* kc, const void*, bool bf16, int64_t ld, int64_t n, int64_t off) {
        with_elements(kc, bf16,
                      [&](auto k) { scores_simd(qp, k, ld, d, G, n, scale, scratch + off, keys, ahead, off); });
      });
      for (int64_t g = 0; g < G; ++g) {
        softmax_inplace(scratch + g * keys, keys);
        heads.p[size_t(g)] = scratch + g * keys;
        heads.o[size_t(g)] = o + g * d;
      }
      output_simd(heads.p.data(), heads.o.data(), G, ch, j, lo, p + 1, d, &ahead);
      continue;
    }
#endif
    // scores[g][t], read every key row once for all G heads
    for_each_piece(ch, j, lo, p + 1, [&](const void* kc, const void*, bool bf16, int64_t ld, int64_t n, int64_t off) {
      with_elements(kc, bf16, [&](auto ks) {
        for (int64_t t = 0; t < n; ++t) {
          const auto* k = ks + t * ld;
          for (int64_t g = 0; g < G; ++g) {
            const float* qg = q + g * d;
            scratch[g * keys + off + t] = dot_widened(k, qg, d) * scale;
          }
        }
      });
    });
    for (int64_t g = 0; g < G; ++g) softmax_inplace(scratch + g * keys, keys);
    std::fill(o, o + G * d, 0.0f);
    for_each_piece(ch, j, lo, p + 1, [&](const void*, const void* vc, bool bf16, int64_t ld, int64_t n, int64_t off) {
      with_elements(vc, bf16, [&](auto vs) {
        for (int64_t t = 0; t < n; ++t) {
          const auto* v = vs + t * ld;
          for (int64_t g = 0; g < G; ++g) {
            const float pr = scratch[g * keys + off + t];
            float* og = o + g * d;
#pragma omp simd
            for (int64_t c = 0; c < d; ++c) og[c] += pr * widen_element(v[c]);
          }
        }
      });
    });
  }
}

// Query rows [row0, row0 + 64) of head h: sgemm for the scores and the output,
// over the keys the block's rows see (all earlier ones, or the window's),
// gathered into one [keys, d] block per K and V when they span several pieces.
void block_task(const CachedAttentionChunk& ch, const CachedAttentionShape& s, int64_t h, int64_t row0,
                float* scratch) {
  const int64_t d = s.head_dim, G = s.q_heads / s.kv_heads, QW = s.q_heads * d;
  const int64_t j = h / G;
  const float scale = 1.0f / std::sqrt(float(d));
  const int64_t row1 = std::min(ch.count, row0 + kQueryBlock), rows = row1 - row0;
  const int64_t klo = cached_attention_first_key(ch.past + row0, ch.window), khi = ch.past + row1;
  const int64_t keys = khi - klo;  // positions klo .. khi - 1
  const float* q = ch.q_SQ + row0 * QW + h * d;
  // One f32 piece is used in place; several pieces, or bf16 ones, are
  // gathered (widened) into one contiguous block per K and V.
  const float *kb = nullptr, *vb = nullptr;
  int64_t ld = d, pieces = 0;
  bool in_place = true;
  for_each_piece(ch, j, klo, khi, [&](const void* kc, const void* vc, bool bf16, int64_t stride, int64_t, int64_t) {
    if (pieces++ == 0) {
      kb = static_cast<const float*>(kc);
      vb = static_cast<const float*>(vc);
      ld = stride;
    }
    in_place = in_place && !bf16;
  });
  if (pieces > 1 || !in_place) {
    float* kg = scratch + std::max(G, kQueryBlock) * keys;
    float* vg = kg + keys * d;
    for_each_piece(ch, j, klo, khi,
                   [&](const void* kc, const void* vc, bool bf16, int64_t stride, int64_t n, int64_t off) {
                     with_elements(kc, bf16, [&](auto k) {
                       for (int64_t t = 0; t < n; ++t)
                         for (int64_t c = 0; c < d; ++c) kg[(off + t) * d + c] = widen_element(k[t * stride + c]);
                     });
                     with_elements(vc, bf16, [&](auto v) {
                       for (int64_t t = 0; t < n; ++t)
                         for (int64_t c = 0; c < d; ++c) vg[(off + t) * d + c] = widen_element(v[t * stride + c]);
                     });
                   });
    kb = kg;
    vb = vg;
    ld = d;
  }
  gemm<float>(false, true, rows, keys, d, scale, q, QW, kb, ld, 0.0f, scratch, keys);
  for (int64_t r = 0; r < rows; ++r) {
    float* pr = scratch + r * keys;
    const int64_t pos = ch.past + row0 + r, first = cached_attention_first_key(pos, ch.window) - klo;
    const int64_t end = pos - klo + 1;
    std::fill(pr, pr + first, 0.0f);
    softmax_inplace(pr + first, end - first);
    std::fill(pr + end, pr + keys, 0.0f);
  }
  gemm<float>(false, false, rows, d, keys, 1.0f, scratch, keys, vb, ld, 0.0f, ch.o_SQ + row0 * QW + h * d, QW);
}

}  // namespace

int64_t cached_attention_scratch_floats(int64_t group, int64_t max_context, int64_t window, int64_t head_dim) {
  // A row sees at most W keys, a block of 64 rows at most W + 63.
  const int64_t keys = window > 0 ? std::min(max_context, window + kQueryBlock - 1) : max_context;
  // The per-row path adds its queries in the scores' order (group rows of head_dim).
  return (std::max(group, kQueryBlock) + 2 * head_dim) * keys + group * head_dim;
}

void cached_attention(std::span<const CachedAttentionChunk> chunks, const CachedAttentionShape& s, float* scratch,
                      int64_t per_thread, int threads) {
  ZAYA_ASSERT(s.kv_heads >= 1 && s.q_heads % s.kv_heads == 0 && threads >= 1);
  thread_local std::vector<Task> tasks;  // reused: no allocation per decode step
  tasks.clear();
  for (size_t ci = 0; ci < chunks.size(); ++ci) {
    const CachedAttentionChunk& ch = chunks[ci];
    ZAYA_ASSERT(cached_attention_scratch_floats(s.q_heads / s.kv_heads, ch.past + ch.count, ch.window, s.head_dim) <=
                per_thread);
    // The spans hold every key a row sees, in order and without gaps.
    ZAYA_ASSERT(ch.span_count >= 1 && ch.spans != nullptr);
    ZAYA_ASSERT(ch.spans[0].first <= cached_attention_first_key(ch.past, ch.window));
    for (int32_t si = 1; si < ch.span_count; ++si)
      ZAYA_ASSERT(ch.spans[si].first == ch.spans[si - 1].first + ch.spans[si - 1].count);
    ZAYA_ASSERT(ch.spans[ch.span_count - 1].first + ch.spans[ch.span_count - 1].count == ch.past + ch.count);
    if (ch.count <= kDecodeRows || ch.rowwise) {
      for (int64_t j = 0; j < s.kv_heads; ++j) tasks.push_back({int32_t(ci), int32_t(j), -1});
    } else {
      for (int64_t h = 0; h < s.q_heads; ++h)
        for (int64_t r0 = 0; r0 < ch.count; r0 += kQueryBlock) tasks.push_back({int32_t(ci), int32_t(h), r0});
    }
  }
  const int64_t n = int64_t(tasks.size());
  // The calling thread's vector, shared with the helpers (as void: a lambda
  // must not capture a type of the anonymous namespace, for unity builds).
  const void* all = tasks.data();
  pool_for(n, threads, [&](int64_t i, int worker) {
    const Task& t = static_cast<const Task*>(all)[i];
    float* mine = scratch + int64_t(worker) * per_thread;
    if (t.row0 < 0)
      rows_task(chunks[t.chunk], s, t.head, mine, per_thread);
    else
      block_task(chunks[t.chunk], s, t.head, t.row0, mine);
  });
}

}  // namespace zaya
