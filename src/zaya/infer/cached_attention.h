#pragma once
// Causal GQA softmax attention of new query rows against a sequence's KV cache
// (spec §3 step 8): a chunk of S queries at positions past .. past+S-1 attends
// to the keys at positions lo(p) .. p, query head h to KV head h / (Hq / Hk),
// where lo(p) = 0 on full-attention layers and max(0, p - W + 1) on a sliding
// layer of window W (spec §12: W counts the query itself).
//
// The keys come as spans of consecutive positions, each with its own strides:
// the pages of a sequence's paged cache (engine.h: one span per page of
// `page_tokens` positions, head-major inside the page) and, on a sliding
// layer, the chunk's own keys in the step's workspace (token-major). The
// spans together must hold every key some row of the chunk sees.
//
// Decode-sized chunks (S <= 4) walk the keys once per KV head for all G query
// heads sharing it (the cache is read once: the bandwidth-bound case), span by
// span; each key's score and the output's running sums are computed in the
// same order however the keys are split, so the result does not depend on the
// page size. A score q . k (vector builds) is one FMA chain per lane over the
// head's elements in pairs of vectors, even elements then odd ones (lane l:
// elements 2l and 2l + 1 of each 2 kW, kW = 16 floats with AVX-512, 8 with
// AVX2), its lanes then summed in _mm512_reduce_add_ps's tree (halves,
// quarters, pairs), kW scores at a time. The output is o = sum_t p_t v_t over
// the normalised softmax p (as prefill's), each element one FMA chain over
// the keys in order (cached_attention.cc). The rows of such a chunk that share
// their first key (a speculative check's K + 1 rows, `rowwise`, on a full
// block) walk the keys together, as G x rows heads, so each key and value row
// is read once per chunk instead of once per row; every row keeps the bits it
// has alone (a one-token step at its position): its scores come from the same
// per-product chains, its softmax runs on its own keys, and its output chains
// go on over the keys only it sees with the same FMAs
// (CachedAttention.RowsOfAVerifiedChunkHaveTheBitsOfSingleRows).
// Longer chunks (prefill) use sgemm blocks of 64 queries, as ops/attention
// does, over only the keys the block's rows see: keys spread over several
// spans are first gathered into one contiguous block per head, so the sgemm
// sees the same operands (and gives the same bits) as over one contiguous
// cache.
// Tasks (chunk x KV head, or chunk x head x query block) run over core/work_pool.h's workers.

#include <cstdint>
#include <span>

namespace zaya {

struct CachedAttentionShape {
  int64_t q_heads = 0, kv_heads = 0, head_dim = 0;
};

// Keys (and values) at positions first .. first+count-1: key t of KV head j at
// element j * head_stride + (t - first) * row_stride of k, values alike; the
// elements are f32, or bf16 (a bf16 KV cache, engine.h), widened exactly as
// they are read, so a bf16 span gives the same result as an f32 span holding
// its values.
struct CachedKeySpan {
  const void* k = nullptr;
  const void* v = nullptr;
  int64_t head_stride = 0;
  int64_t row_stride = 0;
  int64_t first = 0;
  int64_t count = 0;
  bool bf16 = false;
};

struct CachedAttentionChunk {
  const float* q_SQ = nullptr;           // [S, Hq*d] queries after norm and RoPE
  float* o_SQ = nullptr;                 // [S, Hq*d] output
  const CachedKeySpan* spans = nullptr;  // in position order, without gaps
  int32_t span_count = 0;
  int64_t past = 0;
  int64_t count = 0;     // S
  int64_t window = 0;    // W; 0: full causal attention
  bool rowwise = false;  // every row on the per-row (decode) path, whatever S: speculative verification
};

// The first position query position p sees.
inline int64_t cached_attention_first_key(int64_t p, int64_t window) {
  return window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
}

// Scratch floats one thread needs for a context of max_context keys under a
// window (0: full attention), head_dim floats per key: the scores and the
// gathered keys and values of one query block, or a row's scores and its
// group's queries.
int64_t cached_attention_scratch_floats(int64_t group, int64_t max_context, int64_t window, int64_t head_dim);

// Runs on at most `threads` workers of core/work_pool.h; `scratch` holds threads * per_thread floats.
void cached_attention(std::span<const CachedAttentionChunk> chunks, const CachedAttentionShape& shape, float* scratch,
                      int64_t per_thread, int threads);

}  // namespace zaya
