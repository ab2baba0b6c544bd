#pragma once
// Causal GQA softmax attention of new query rows against a sequence's KV cache
// (spec §3 step 8): a chunk of S queries at positions past .. past+S-1 attends
// to cache rows 0 .. its own position, query head h to KV head h / (Hq / Hk).
//
// Decode-sized chunks (S <= 4) walk the cache once per KV head for all G query
// heads sharing it (the cache is read once: the bandwidth-bound case); longer
// chunks (prefill) use sgemm blocks of 64 queries, as ops/attention does.
// Tasks (chunk x KV head, or chunk x head x query block) run over OpenMP threads.

#include <cstdint>
#include <span>

namespace zaya {

struct CachedAttentionShape {
  int64_t q_heads = 0, kv_heads = 0, head_dim = 0;
};

struct CachedAttentionChunk {
  const float* q_SQ = nullptr;  // [S, Hq*d] queries after norm and RoPE
  float* o_SQ = nullptr;        // [S, Hq*d] output
  // Head-major caches: key t of KV head j at k_cache[j * head_stride + t * d]
  // (the chunk's own keys already appended), values alike.
  const float* k_cache = nullptr;
  const float* v_cache = nullptr;
  int64_t head_stride = 0;
  int64_t past = 0;
  int64_t count = 0;  // S
};

// Scratch floats one thread needs for a context of max_context keys.
int64_t cached_attention_scratch_floats(int64_t group, int64_t max_context);

// Runs on at most `threads` OpenMP threads; `scratch` holds threads * per_thread floats.
void cached_attention(std::span<const CachedAttentionChunk> chunks, const CachedAttentionShape& shape, float* scratch,
                      int64_t per_thread, int threads);

}  // namespace zaya
