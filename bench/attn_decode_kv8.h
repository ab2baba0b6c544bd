// Prototype (bench only): the per-row decode attention over an 8-bit KV
// cache. Each (position, KV head) row of K and of V is int8 with one f32
// scale (absmax / 127, rounded to nearest, clamped to +-127), in pages of the
// current shape: [Hk][P][d] int8 for K and for V, and [Hk][P] f32 scales for
// each. An f32 scale: exact (no rounding of absmax / 127), no conversion in
// the loops, and 4 bytes beside a 64-byte row (an f16 one would save 2 of
// 68, 3%, for a vcvtph2ps per scale vector and a range to watch).
//   score_t = scale * ks_t * sum_c q[c] * k8_t[c]   (the int8 row widened to
//             f32, FMAs; the row's scale applied once per score)
//   o      += (p_t * vs_t) * widened v8_t
// The softmax and the tiles of heads and keys are rows_task's; the widening
// keeps the elements in order (q is not permuted).
// VNNI (AVX-512 VNNI builds, a second variant): the scores as integer dot
// products instead, one vpdpbusd per 64 elements of a key row and head: each
// query row quantized to int8 too (absmax / 127, once per row and head, as
// llama.cpp's q8_0 x q8_0 dot does), the keys stored offset as uint8
// (k8 + 128, the instruction's unsigned operand), so
//   score_t = scale * qs * ks_t * (sum_c q8[c] (k8_t[c] + 128) - 128 sum_c q8[c])
// exact in int32 and in f32 (|sum| < 64 * 127 * 255 < 2^24 at d = 64). Included after a
// cached_attention.cc (bench/attn_decode.cc): uses its Simd, kW, sums_slot and
// softmax_inplace.
#pragma once

#include <cmath>
#include <optional>

namespace zaya {
namespace {

// One span of 8-bit pages: rows of KV head j at positions first + t are
// k + j * head_stride + t * row_stride (int8), their scales
// ks[j * scale_stride + t] (f32); V alike.
struct Kv8Span {
  const int8_t* k = nullptr;
  const int8_t* v = nullptr;
  const float* ks = nullptr;
  const float* vs = nullptr;
  int64_t head_stride = 0;
  int64_t row_stride = 0;
  int64_t scale_stride = 0;
  int64_t first = 0;
  int64_t count = 0;
};

// x[0, d) as int8 with one scale (absmax / 127): returns the scale.
inline float quantize_row_i8(const float* x, int64_t d, int8_t* out) {
  float mx = 0;
  for (int64_t c = 0; c < d; ++c) mx = std::max(mx, std::fabs(x[c]));
  const float scale = mx / 127.0f, inv = mx > 0 ? 127.0f / mx : 0.0f;
  for (int64_t c = 0; c < d; ++c) out[c] = int8_t(std::clamp<long>(std::lrint(x[c] * inv), -127, 127));
  return scale;
}

#ifdef ZAYA_ATTN_SIMD
// kW int8 elements widened to f32, in order.
__attribute__((always_inline)) inline Simd::V load_i8(const int8_t* p) {
#if defined(__AVX512F__)
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
#else
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
#endif
}

// Fetches towards L1 the 8-bit rows of KV head j at positions [lo, hi) in the
// order rows_task_kv8 reads them (keys, then values; row `keys + i` is value
// i), with their scales; RowPrefetcher's scheme for the 8-bit spans.
class Kv8Prefetcher {
 public:
  Kv8Prefetcher(const Kv8Span* spans, int32_t count, int64_t j, int64_t lo, int64_t hi, int64_t d)
      : sp_(spans), n_(count), j_(j), lo_(lo), hi_(hi), d_(d), pos_(lo) {
    seek();
  }
  __attribute__((always_inline)) void to(int64_t rows) {
    if (fetched_ < rows) fetch_to(rows);
  }

 private:
  __attribute__((noinline)) void fetch_to(int64_t rows) {
    const int64_t target = rows + RowPrefetcher::kBatch;
    while (fetched_ < target && span_ < n_) fetch_run(target - fetched_);
  }
  void seek() {
    while (span_ < n_ && sp_[span_].first + sp_[span_].count <= pos_) ++span_;
  }
  static void fetch(const char* first, const char* end) {
    for (uintptr_t a = reinterpret_cast<uintptr_t>(first) & ~uintptr_t(63); a < reinterpret_cast<uintptr_t>(end);
         a += 64)
      _mm_prefetch(reinterpret_cast<const char*>(a), _MM_HINT_T0);
  }
  void fetch_run(int64_t most) {
    const Kv8Span& sp = sp_[span_];
    const int64_t n = std::min({most, sp.first + sp.count - pos_, hi_ - pos_}), t = pos_ - sp.first;
    const char* first =
        reinterpret_cast<const char*>((values_ ? sp.v : sp.k) + j_ * sp.head_stride + t * sp.row_stride);
    fetch(first, first + (n - 1) * sp.row_stride + d_);
    const float* s = (values_ ? sp.vs : sp.ks) + j_ * sp.scale_stride + t;
    fetch(reinterpret_cast<const char*>(s), reinterpret_cast<const char*>(s + n));
    fetched_ += n;
    pos_ += n;
    if (pos_ == hi_) {
      if (values_) {
        span_ = n_;
        return;
      }
      values_ = true;
      pos_ = lo_;
      span_ = 0;
    }
    seek();
  }

  const Kv8Span* sp_;
  int32_t n_;
  int64_t j_, lo_, hi_, d_;
  int64_t pos_, fetched_ = 0;
  int32_t span_ = 0;
  bool values_ = false;
};

// score_tile over int8 key rows (elements in order, q in natural order).
template <int GB>
__attribute__((always_inline)) inline Simd::V score_tile_i8(const float* const (&qh)[GB],
                                                            const int8_t* const (&kr)[kW / GB], int64_t nv) {
  constexpr int KB = int(kW) / GB;
  Simd::V acc[kW];
  for (int i = 0; i < int(kW); ++i) acc[i] = Simd::zero();
  for (int64_t v = 0; v < nv; ++v) {
    for (int i = 0; i < KB; ++i) {
      const Simd::V k = load_i8(kr[i] + kW * v);
      for (int g = 0; g < GB; ++g) {
        Simd::V& a = acc[sums_slot(g * KB + i)];
        a = Simd::fmadd(Simd::load(qh[g] + kW * v), k, a);
      }
    }
  }
  return Simd::sums(acc);
}

#ifdef __AVX512VNNI__
// Simd::sums, inlined (GCC calls it from score_tile_vnni, its 16 vectors
// through memory: 12% of the samples).
__attribute__((always_inline)) inline __m512 sums_inline(const __m512 (&a)[16]) {
  __m512 b[8], c[4], e[2];
  for (int p = 0; p < 8; ++p)
    b[p] = _mm512_add_ps(_mm512_mask_blend_ps(0xFF00, a[2 * p], a[2 * p + 1]),
                         _mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], 0x4E));
  for (int p = 0; p < 4; ++p)
    c[p] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * p], b[2 * p + 1], 0x88),
                         _mm512_shuffle_f32x4(b[2 * p], b[2 * p + 1], 0xDD));
  for (int p = 0; p < 2; ++p)
    e[p] = _mm512_add_ps(_mm512_mask_blend_ps(0xCCCC, c[2 * p], c[2 * p + 1]),
                         _mm512_shuffle_ps(c[2 * p], c[2 * p + 1], 0x4E));
  return _mm512_add_ps(_mm512_mask_blend_ps(0xAAAA, e[0], e[1]),
                       _mm512_permute_ps(_mm512_mask_blend_ps(0x5555, e[0], e[1]), 0xB1));
}

// score_tile over uint8 (offset) key rows and int8 queries (q8[g]: 64-byte
// vectors, nv of them): the int32 sums of the tile, widened to f32, summed.
template <int GB>
__attribute__((always_inline)) inline Simd::V score_tile_vnni(const __m512i* const (&q8)[GB],
                                                              const uint8_t* const (&kr)[kW / GB], int64_t nv) {
  constexpr int KB = int(kW) / GB;
  __m512i acc[kW];
  for (int i = 0; i < int(kW); ++i) acc[i] = _mm512_setzero_si512();
  for (int64_t v = 0; v < nv; ++v)
    for (int i = 0; i < KB; ++i) {
      const __m512i k = _mm512_loadu_si512(kr[i] + 64 * v);
      for (int g = 0; g < GB; ++g) {
        __m512i& a = acc[sums_slot(g * KB + i)];
        a = _mm512_dpbusd_epi32(a, k, q8[g][v]);
      }
    }
  Simd::V f[kW];
  for (int i = 0; i < int(kW); ++i) f[i] = _mm512_cvtepi32_ps(acc[i]);
  return sums_inline(f);
}

// The G query rows quantized for score_tile_vnni (G <= 8, d <= 256), once per row.
struct QueryI8 {
  alignas(64) int8_t q8[8 * 256];
  float qs[8], qsum[8];  // scales, 128 x the sums of q8
  QueryI8(const float* q, int64_t d, int64_t G) {
    for (int64_t g = 0; g < G; ++g) {
      qs[g] = quantize_row_i8(q + g * d, d, q8 + g * d);
      int32_t sum = 0;
      for (int64_t c = 0; c < d; ++c) sum += q8[g * d + c];
      qsum[g] = 128.0f * float(sum);
    }
  }
};

// scores_heads_i8 with score_tile_vnni (d % 64 == 0): kc holds the keys
// offset as uint8.
template <int GB>
void scores_heads_vnni(const QueryI8& qi, const uint8_t* kc, const float* ks, int64_t ldk, int64_t d, int64_t G,
                       int64_t n, float scale, float* scores, int64_t lds, Kv8Prefetcher& ahead, int64_t row0) {
  constexpr int KB = int(kW) / GB;
  const int64_t nv = d / 64;
  const int8_t* q8 = qi.q8;
  const float *qs = qi.qs, *qsum = qi.qsum;
  alignas(64) float tile[kW];
  for (int64_t g0 = 0; g0 < G; g0 += GB) {
    const int64_t gn = std::min<int64_t>(GB, G - g0);
    const __m512i* qh[GB];
    for (int g = 0; g < GB; ++g) qh[g] = reinterpret_cast<const __m512i*>(q8 + (g0 + std::min<int64_t>(g, gn - 1)) * d);
    for (int64_t t = 0; t < n; t += KB) {
      if (g0 == 0) ahead.to(row0 + t + KB + RowPrefetcher::kAhead);
      const int64_t kn = std::min<int64_t>(KB, n - t);
      const uint8_t* kr[KB];
      for (int i = 0; i < KB; ++i) kr[i] = kc + (t + std::min<int64_t>(i, kn - 1)) * ldk;
      Simd::store(tile, score_tile_vnni<GB>(qh, kr, nv));
      for (int64_t g = 0; g < gn; ++g) {
        float* out = scores + (g0 + g) * lds + t;
        if (kn == KB)
          std::memcpy(out, tile + g * KB, sizeof(float) * KB);
        else
          std::memcpy(out, tile + g * KB, sizeof(float) * kn);
      }
    }
  }
  for (int64_t g = 0; g < G; ++g) {  // the offset and the scales, once per score
    float* out = scores + g * lds;
    const float s = scale * qs[g], off = qsum[g];
#pragma omp simd
    for (int64_t t = 0; t < n; ++t) out[t] = (out[t] - off) * (s * ks[t]);
  }
}
#endif

// scores[g * lds + t] = scale * ks[t] * q_g . k8_t for n keys of one span
// piece (kc: its first row, ks: its first scale), scores_heads' tiling.
template <int GB>
void scores_heads_i8(const float* q, const int8_t* kc, const float* ks, int64_t ldk, int64_t d, int64_t G, int64_t n,
                     float scale, float* scores, int64_t lds, Kv8Prefetcher& ahead, int64_t row0) {
  constexpr int KB = int(kW) / GB;
  const int64_t nv = d / kW;
  alignas(64) float tile[kW];
  for (int64_t g0 = 0; g0 < G; g0 += GB) {
    const int64_t gn = std::min<int64_t>(GB, G - g0);
    const float* qh[GB];
    for (int g = 0; g < GB; ++g) qh[g] = q + (g0 + std::min<int64_t>(g, gn - 1)) * d;
    for (int64_t t = 0; t < n; t += KB) {
      if (g0 == 0) ahead.to(row0 + t + KB + RowPrefetcher::kAhead);
      const int64_t kn = std::min<int64_t>(KB, n - t);
      const int8_t* kr[KB];
      for (int i = 0; i < KB; ++i) kr[i] = kc + (t + std::min<int64_t>(i, kn - 1)) * ldk;
      Simd::store(tile, score_tile_i8<GB>(qh, kr, nv));
      for (int64_t g = 0; g < gn; ++g) {
        float* out = scores + (g0 + g) * lds + t;
        if (kn == KB)
          std::memcpy(out, tile + g * KB, sizeof(float) * KB);
        else
          std::memcpy(out, tile + g * KB, sizeof(float) * kn);
      }
    }
  }
  for (int64_t g = 0; g < G; ++g) {  // the row scales, once per score
    float* out = scores + g * lds;
#pragma omp simd
    for (int64_t t = 0; t < n; ++t) out[t] *= scale * ks[t];
  }
}

// acc[g][v] += (p[g][t] * vs[t]) * widened v8_t[c0 + ...], elements in order.
template <int GN, int NV>
__attribute__((always_inline)) inline void output_run_i8(Simd::V (&acc)[GN][NV], const float* p, int64_t ldp, int64_t n,
                                                         const int8_t* vc, const float* vs, int64_t ldv, int64_t c0,
                                                         Kv8Prefetcher* ahead, int64_t row0) {
  Simd::V r[GN][NV];
  for (int g = 0; g < GN; ++g)
    for (int v = 0; v < NV; ++v) r[g][v] = acc[g][v];
  for (int64_t t = 0; t < n; ++t) {
    if (ahead != nullptr) ahead->to(row0 + t + 1 + RowPrefetcher::kAhead);
    Simd::V vv[NV];
    for (int v = 0; v < NV; ++v) vv[v] = load_i8(vc + t * ldv + c0 + kW * v);
    const float s = vs[t];
    for (int g = 0; g < GN; ++g) {
      const Simd::V pg = Simd::set1(p[g * ldp + t] * s);
      for (int v = 0; v < NV; ++v) r[g][v] = Simd::fmadd(pg, vv[v], r[g][v]);
    }
  }
  for (int g = 0; g < GN; ++g)
    for (int v = 0; v < NV; ++v) acc[g][v] = r[g][v];
}

template <int GN, int NV>
void output_tile_i8(const float* p, int64_t ldp, const Kv8Span* spans, int32_t count, int64_t j, int64_t lo, int64_t hi,
                    int64_t d, int64_t c0, float* o, Kv8Prefetcher* ahead) {
  Simd::V acc[GN][NV];
  for (int g = 0; g < GN; ++g)
    for (int v = 0; v < NV; ++v) acc[g][v] = Simd::zero();
  const int64_t keys = hi - lo;
  for (int32_t si = 0; si < count; ++si) {
    const Kv8Span& sp = spans[si];
    const int64_t a = std::max(lo, sp.first), b = std::min(hi, sp.first + sp.count);
    if (a >= b) continue;
    const int64_t off = a - lo;
    output_run_i8<GN, NV>(acc, p + off, ldp, b - a, sp.v + j * sp.head_stride + (a - sp.first) * sp.row_stride,
                          sp.vs + j * sp.scale_stride + (a - sp.first), sp.row_stride, c0, ahead, keys + off);
  }
  for (int g = 0; g < GN; ++g)
    for (int v = 0; v < NV; ++v) Simd::store(o + g * d + c0 + kW * v, acc[g][v]);
}

template <int GN>
void output_heads_i8(const float* p, int64_t ldp, const Kv8Span* spans, int32_t count, int64_t j, int64_t lo,
                     int64_t hi, int64_t d, float* o, Kv8Prefetcher* ahead) {
  for (int64_t c0 = 0; c0 < d; c0 += 4 * kW) {
    Kv8Prefetcher* a = c0 == 0 ? ahead : nullptr;
    switch (std::min<int64_t>(4, (d - c0) / kW)) {
      case 1: output_tile_i8<GN, 1>(p, ldp, spans, count, j, lo, hi, d, c0, o, a); break;
      case 2: output_tile_i8<GN, 2>(p, ldp, spans, count, j, lo, hi, d, c0, o, a); break;
      case 3: output_tile_i8<GN, 3>(p, ldp, spans, count, j, lo, hi, d, c0, o, a); break;
      default: output_tile_i8<GN, 4>(p, ldp, spans, count, j, lo, hi, d, c0, o, a); break;
    }
  }
}

// rows_task over 8-bit spans (bench prototype; d % kW == 0). vnni: the
// scores by score_tile_vnni, over the spans' keys offset as uint8 (their k
// pointers), d % 64 == 0.
void rows_task_kv8(const CachedAttentionChunk& ch, const Kv8Span* spans, int32_t count, const CachedAttentionShape& s,
                   int64_t j, float* scratch, bool vnni = false) {
  const int64_t d = s.head_dim, G = s.q_heads / s.kv_heads, QW = s.q_heads * d;
  const float scale = 1.0f / std::sqrt(float(d));
  for (int64_t i = 0; i < ch.count; ++i) {
    const int64_t p = ch.past + i, lo = cached_attention_first_key(p, ch.window), keys = p - lo + 1;
    const float* q = ch.q_SQ + i * QW + j * G * d;
    float* o = ch.o_SQ + i * QW + j * G * d;
    Kv8Prefetcher ahead(spans, count, j, lo, p + 1, d);
#ifdef __AVX512VNNI__
    std::optional<QueryI8> qi;
    if (vnni) qi.emplace(q, d, G);
#endif
    for (int32_t si = 0; si < count; ++si) {
      const Kv8Span& sp = spans[si];
      const int64_t a = std::max(lo, sp.first), b = std::min(p + 1, sp.first + sp.count);
      if (a >= b) continue;
      const int8_t* kc = sp.k + j * sp.head_stride + (a - sp.first) * sp.row_stride;
      const float* ks = sp.ks + j * sp.scale_stride + (a - sp.first);
      const int64_t off = a - lo;
#ifdef __AVX512VNNI__
      if (vnni) {
        scores_heads_vnni<2>(*qi, reinterpret_cast<const uint8_t*>(kc), ks, sp.row_stride, d, G, b - a, scale,
                             scratch + off, keys, ahead, off);
        continue;
      }
#endif
      if (G >= 2)
        scores_heads_i8<2>(q, kc, ks, sp.row_stride, d, G, b - a, scale, scratch + off, keys, ahead, off);
      else
        scores_heads_i8<1>(q, kc, ks, sp.row_stride, d, G, b - a, scale, scratch + off, keys, ahead, off);
    }
    for (int64_t g = 0; g < G; ++g) softmax_inplace(scratch + g * keys, keys);
    for (int64_t g0 = 0; g0 < G; g0 += Simd::kHeadsPerTile) {
      const int64_t gn = std::min<int64_t>(Simd::kHeadsPerTile, G - g0);
      Kv8Prefetcher* a = g0 == 0 ? &ahead : nullptr;
      const float* pg = scratch + g0 * keys;
      float* og = o + g0 * d;
      if (gn >= 4)
        output_heads_i8<4>(pg, keys, spans, count, j, lo, p + 1, d, og, a);
      else if (gn == 3)
        output_heads_i8<3>(pg, keys, spans, count, j, lo, p + 1, d, og, a);
      else if (gn == 2)
        output_heads_i8<2>(pg, keys, spans, count, j, lo, p + 1, d, og, a);
      else
        output_heads_i8<1>(pg, keys, spans, count, j, lo, p + 1, d, og, a);
    }
  }
}
#endif

}  // namespace
}  // namespace zaya
