#include "zaya/infer/cached_attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "zaya/core/bf16.h"
#include "zaya/core/error.h"
#include "zaya/ops/dot_widened.h"
#include "zaya/ops/matmul.h"
#include "zaya/ops/row_max.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#define ZAYA_ATTN_AVX512 1
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
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

// Softmax of p[0..n) in place; returns nothing (the row sums to 1).
inline void softmax_inplace(float* p, int64_t n) {
  const float mx = row_max(p, n);
  float sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) {
    p[i] = std::exp(p[i] - mx);
    sum += p[i];
  }
  const float inv = 1.0f / sum;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) p[i] *= inv;
}

#ifdef ZAYA_ATTN_AVX512
// 16 cache elements as floats (bf16: the top half of a float32).
inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const uint16_t* p) {
  return _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
}

// scores[g * lds + t] = scale * q_g . k_t for the G heads of one KV head, n
// keys ldk elements apart (d % 16 == 0); four keys at a time, so four
// independent FMA chains hide the load latency.
template <typename E>
void scores_avx512(const float* q, const E* kc, int64_t ldk, int64_t d, int64_t G, int64_t n, float scale,
                   float* scores, int64_t lds) {
  const int64_t nv = d / 16;
  for (int64_t g = 0; g < G; ++g) {
    const float* qg = q + g * d;
    float* sg = scores + g * lds;
    int64_t t = 0;
    for (; t + 4 <= n; t += 4) {
      const E* k = kc + t * ldk;
      __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
      for (int64_t v = 0; v < nv; ++v) {
        const __m512 qv = _mm512_loadu_ps(qg + 16 * v);
        a0 = _mm512_fmadd_ps(qv, load16(k + 16 * v), a0);
        a1 = _mm512_fmadd_ps(qv, load16(k + ldk + 16 * v), a1);
        a2 = _mm512_fmadd_ps(qv, load16(k + 2 * ldk + 16 * v), a2);
        a3 = _mm512_fmadd_ps(qv, load16(k + 3 * ldk + 16 * v), a3);
      }
      sg[t] = scale * _mm512_reduce_add_ps(a0);
      sg[t + 1] = scale * _mm512_reduce_add_ps(a1);
      sg[t + 2] = scale * _mm512_reduce_add_ps(a2);
      sg[t + 3] = scale * _mm512_reduce_add_ps(a3);
    }
    for (; t < n; ++t) {
      const E* k = kc + t * ldk;
      __m512 acc = _mm512_setzero_ps();
      for (int64_t v = 0; v < nv; ++v) acc = _mm512_fmadd_ps(_mm512_loadu_ps(qg + 16 * v), load16(k + 16 * v), acc);
      sg[t] = scale * _mm512_reduce_add_ps(acc);
    }
  }
}

// o_g[c0 .. c0 + 16 NV) (+)= sum_t p[g][t] v_t for GN heads, accumulated in
// registers (compile-time sizes keep the 16 accumulators out of memory);
// `add` continues the sums already in o (the next span of keys).
template <int GN, int NV, typename E>
void output_tile(const float* p, int64_t ldp, int64_t n, const E* vc, int64_t ldv, int64_t d, int64_t c0, float* o,
                 bool add) {
  __m512 acc[GN][NV];
  for (int g = 0; g < GN; ++g)
    for (int v = 0; v < NV; ++v) acc[g][v] = add ? _mm512_loadu_ps(o + g * d + c0 + 16 * v) : _mm512_setzero_ps();
  for (int64_t t = 0; t < n; ++t) {
    const E* vr = vc + t * ldv + c0;
    __m512 vv[NV];
    for (int v = 0; v < NV; ++v) vv[v] = load16(vr + 16 * v);
    for (int g = 0; g < GN; ++g) {
      const __m512 pg = _mm512_set1_ps(p[g * ldp + t]);
      for (int v = 0; v < NV; ++v) acc[g][v] = _mm512_fmadd_ps(pg, vv[v], acc[g][v]);
    }
  }
  for (int g = 0; g < GN; ++g)
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(o + g * d + c0 + 16 * v, acc[g][v]);
}

template <int GN, typename E>
void output_heads(const float* p, int64_t ldp, int64_t n, const E* vc, int64_t ldv, int64_t d, float* o, bool add) {
  for (int64_t c0 = 0; c0 < d; c0 += 64) {
    switch (std::min<int64_t>(4, (d - c0) / 16)) {
      case 1: output_tile<GN, 1>(p, ldp, n, vc, ldv, d, c0, o, add); break;
      case 2: output_tile<GN, 2>(p, ldp, n, vc, ldv, d, c0, o, add); break;
      case 3: output_tile<GN, 3>(p, ldp, n, vc, ldv, d, c0, o, add); break;
      default: output_tile<GN, 4>(p, ldp, n, vc, ldv, d, c0, o, add); break;
    }
  }
}

// o_g (+)= sum_t p[g][t] v_t for the G heads, up to 4 at a time (each V row is
// read once per 4 heads and 64 output floats); d % 16 == 0.
template <typename E>
void output_avx512(const float* p, int64_t ldp, const E* vc, int64_t ldv, int64_t d, int64_t G, int64_t n, float* o,
                   bool add) {
  for (int64_t g0 = 0; g0 < G; g0 += 4) {
    const float* pg = p + g0 * ldp;
    float* og = o + g0 * d;
    switch (std::min<int64_t>(4, G - g0)) {
      case 1: output_heads<1>(pg, ldp, n, vc, ldv, d, og, add); break;
      case 2: output_heads<2>(pg, ldp, n, vc, ldv, d, og, add); break;
      case 3: output_heads<3>(pg, ldp, n, vc, ldv, d, og, add); break;
      default: output_heads<4>(pg, ldp, n, vc, ldv, d, og, add); break;
    }
  }
}
#endif

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

// Every query row of a short chunk against KV head j, for the G query heads that share it.
void rows_task(const CachedAttentionChunk& ch, const CachedAttentionShape& s, int64_t j, float* scratch) {
  const int64_t d = s.head_dim, G = s.q_heads / s.kv_heads, QW = s.q_heads * d;
  const float scale = 1.0f / std::sqrt(float(d));
  for (int64_t i = 0; i < ch.count; ++i) {
    const int64_t p = ch.past + i, lo = cached_attention_first_key(p, ch.window), keys = p - lo + 1;
    const float* q = ch.q_SQ + i * QW + j * G * d;
    float* o = ch.o_SQ + i * QW + j * G * d;
#ifdef ZAYA_ATTN_AVX512
    if (d % 16 == 0) {
      for_each_piece(ch, j, lo, p + 1, [&](const void* kc, const void*, bool bf16, int64_t ld, int64_t n, int64_t off) {
        with_elements(kc, bf16, [&](auto k) { scores_avx512(q, k, ld, d, G, n, scale, scratch + off, keys); });
      });
      for (int64_t g = 0; g < G; ++g) softmax_inplace(scratch + g * keys, keys);
      bool add = false;
      for_each_piece(ch, j, lo, p + 1, [&](const void*, const void* vc, bool bf16, int64_t ld, int64_t n, int64_t off) {
        with_elements(vc, bf16, [&](auto v) { output_avx512(scratch + off, keys, v, ld, d, G, n, o, add); });
        add = true;
      });
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
  return (std::max(group, kQueryBlock) + 2 * head_dim) * keys;
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
    if (ch.count <= kDecodeRows) {
      for (int64_t j = 0; j < s.kv_heads; ++j) tasks.push_back({int32_t(ci), int32_t(j), -1});
    } else {
      for (int64_t h = 0; h < s.q_heads; ++h)
        for (int64_t r0 = 0; r0 < ch.count; r0 += kQueryBlock) tasks.push_back({int32_t(ci), int32_t(h), r0});
    }
  }
  const int64_t n = int64_t(tasks.size());
  const Task* all = tasks.data();  // the calling thread's vector, shared with the team
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (n > 1)
  for (int64_t i = 0; i < n; ++i) {
    const Task& t = all[i];
    float* mine = scratch + int64_t(omp_get_thread_num()) * per_thread;
    if (t.row0 < 0)
      rows_task(chunks[t.chunk], s, t.head, mine);
    else
      block_task(chunks[t.chunk], s, t.head, t.row0, mine);
  }
}

}  // namespace zaya
