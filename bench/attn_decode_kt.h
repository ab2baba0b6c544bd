// Prototype (bench only): the per-row decode scores over K pages stored
// transposed, position-minor inside a page: for KV head j of a page of P
// positions, a bf16 page holds element pairs [d/2][P][2] (elements c, c + 1 of
// position t adjacent: one 32-bit lane), an f32 page [d][P]. A block of kW
// consecutive positions' element c is then one vector (bf16: a pair of
// elements per load, split by a shift and a mask, as Simd::load_even_odd
// does), so kW keys' scores for one query head are d FMAs of the broadcast
// q[c] with it, one chain per score over c in order, no lane sums: the kW
// scores land in one register in key order. The same order in both element
// types: a bf16 page gives the bits of an f32 page of its values.
// Included after a cached_attention.cc (bench/attn_decode.cc): uses its Simd,
// RowPrefetcher, softmax_inplace and output_simd.
#pragma once
#ifndef KT_NB
#define KT_NB 4  // blocks of kW positions per pass (bench/attn_decode_kt.h)
#endif

namespace zaya {
namespace {

#ifdef ZAYA_ATTN_SIMD
// acc[g][b] = q_g . k over block b's kW positions (lane i: position i), NB
// blocks of kW positions; kb[b]: the block's first element (pair) row, ld
// elements from one element (pair) row to the next.
template <int GB, int NB>
__attribute__((always_inline)) inline void kt_dots(const float* const (&qh)[GB], const uint16_t* const (&kb)[NB],
                                                   int64_t ld, int64_t d, Simd::V (&acc)[GB][NB]) {
  for (int g = 0; g < GB; ++g)
    for (int b = 0; b < NB; ++b) acc[g][b] = Simd::zero();
  for (int64_t c = 0; c < d; c += 2) {
    for (int b = 0; b < NB; ++b) {
      Simd::V even, odd;
      Simd::load_even_odd(kb[b] + (c / 2) * ld, even, odd);
      for (int g = 0; g < GB; ++g) {
        acc[g][b] = Simd::fmadd(Simd::set1(qh[g][c]), even, acc[g][b]);
        acc[g][b] = Simd::fmadd(Simd::set1(qh[g][c + 1]), odd, acc[g][b]);
      }
    }
  }
}
template <int GB, int NB>
__attribute__((always_inline)) inline void kt_dots(const float* const (&qh)[GB], const float* const (&kb)[NB],
                                                   int64_t ld, int64_t d, Simd::V (&acc)[GB][NB]) {
  for (int g = 0; g < GB; ++g)
    for (int b = 0; b < NB; ++b) acc[g][b] = Simd::zero();
  for (int64_t c = 0; c < d; ++c) {
    for (int b = 0; b < NB; ++b) {
      const Simd::V k = Simd::load(kb[b] + c * ld);
      for (int g = 0; g < GB; ++g) acc[g][b] = Simd::fmadd(Simd::set1(qh[g][c]), k, acc[g][b]);
    }
  }
}

// scores[g * lds + t - lo] = scale * q_g . k_t, t in [lo, hi), for GB heads
// (qh: natural order), the keys in the chunk's transposed pages (KV head j),
// NB blocks of kW positions at a time.
template <int GB, int NB, typename E>
void kt_scores_heads(const float* const (&qh)[GB], int64_t gn, const CachedAttentionChunk& ch, int64_t j, int64_t lo,
                     int64_t hi, int64_t d, float scale, float* scores, int64_t lds, RowPrefetcher* ahead) {
  const Simd::V s = Simd::set1(scale);
  const E* kb[NB];
  int64_t first[NB];
  int64_t ld = 0;
  int nb = 0;
  alignas(64) float tile[kW];
  auto flush = [&] {
    for (int b = nb; b < NB; ++b) kb[b] = kb[nb - 1];
    Simd::V acc[GB][NB];
    kt_dots<GB, NB>(qh, kb, ld, d, acc);
    for (int b = 0; b < nb; ++b) {
      const int64_t a = std::max(lo, first[b]), e = std::min(hi, first[b] + kW);
      for (int64_t g = 0; g < gn; ++g) {
        float* out = scores + g * lds - lo;
        if (a == first[b] && e == first[b] + kW) {
          Simd::store(out + a, Simd::mul(s, acc[g][b]));
        } else {
          Simd::store(tile, Simd::mul(s, acc[g][b]));
          std::memcpy(out + a, tile + (a - first[b]), sizeof(float) * (e - a));
        }
      }
    }
    nb = 0;
  };
  for (int32_t si = 0; si < ch.span_count; ++si) {
    const CachedKeySpan& sp = ch.spans[si];
    if (sp.first + sp.count <= lo || sp.first >= hi) continue;
    const int64_t P = sp.head_stride / d;  // positions a page holds
    const int64_t pair = std::is_same_v<E, uint16_t> ? 2 : 1;
    const E* page = static_cast<const E*>(sp.k) + j * sp.head_stride;
    for (int64_t b0 = 0; b0 < sp.count; b0 += kW) {
      const int64_t f = sp.first + b0;
      if (f + kW <= lo || f >= hi) continue;
      if (nb > 0 && ld != P * pair) flush();
      ld = P * pair;
      kb[nb] = page + b0 * pair;
      first[nb] = f;
      if (++nb == NB) {
        if (ahead) ahead->to(f + kW - lo + RowPrefetcher::kAhead);
        flush();
      }
    }
  }
  if (nb > 0) flush();
}

// rows_task with the scores over transposed K pages (bench prototype).
void rows_task_kt(const CachedAttentionChunk& ch, const CachedAttentionShape& s, int64_t j, float* scratch) {
  const int64_t d = s.head_dim, G = s.q_heads / s.kv_heads, QW = s.q_heads * d;
  const float scale = 1.0f / std::sqrt(float(d));
  for (int64_t i = 0; i < ch.count; ++i) {
    const int64_t p = ch.past + i, lo = cached_attention_first_key(p, ch.window), keys = p - lo + 1;
    const float* q = ch.q_SQ + i * QW + j * G * d;
    float* o = ch.o_SQ + i * QW + j * G * d;
    RowPrefetcher ahead(ch, j, lo, p + 1, d);
    const bool bf16 = ch.spans[0].bf16;
    for (int64_t g0 = 0; g0 < G; g0 += 2) {
      const int64_t gn = std::min<int64_t>(2, G - g0);
      const float* qh[2] = {q + g0 * d, q + (g0 + gn - 1) * d};
      RowPrefetcher* a = g0 == 0 ? &ahead : nullptr;
      if (bf16)
        kt_scores_heads<2, KT_NB, uint16_t>(qh, gn, ch, j, lo, p + 1, d, scale, scratch + g0 * keys, keys, a);
      else
        kt_scores_heads<2, KT_NB, float>(qh, gn, ch, j, lo, p + 1, d, scale, scratch + g0 * keys, keys, a);
    }
    for (int64_t g = 0; g < G; ++g) softmax_inplace(scratch + g * keys, keys);
    output_simd(scratch, keys, ch, j, lo, p + 1, d, G, o, ahead);
  }
}
#endif

}  // namespace
}  // namespace zaya
