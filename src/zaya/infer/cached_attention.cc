#include "zaya/infer/cached_attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "zaya/core/error.h"
#include "zaya/ops/matmul.h"

namespace zaya {
namespace {

constexpr int64_t kDecodeRows = 4;   // chunks up to this many queries take the per-row path
constexpr int64_t kQueryBlock = 64;  // query rows per sgemm block

struct Task {
  int32_t chunk;
  int32_t head;     // KV head (row path) or query head (block path)
  int64_t row0;     // first query row of the block (block path), -1 for the row path
};

// Softmax of p[0..n) in place; returns nothing (the row sums to 1).
inline void softmax_inplace(float* p, int64_t n) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, p[i]);
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

// Every query row of a short chunk against KV head j, for the G query heads that share it.
void rows_task(const CachedAttentionChunk& ch, const CachedAttentionShape& s, int64_t j, float* scratch) {
  const int64_t d = s.head_dim, G = s.q_heads / s.kv_heads, QW = s.q_heads * d, KW = s.kv_heads * d;
  const float scale = 1.0f / std::sqrt(float(d));
  for (int64_t i = 0; i < ch.count; ++i) {
    const int64_t keys = ch.past + i + 1;
    const float* q = ch.q_SQ + i * QW + j * G * d;
    // scores[g][t], read every key row once for all G heads
    for (int64_t t = 0; t < keys; ++t) {
      const float* k = ch.k_cache + t * KW + j * d;
      for (int64_t g = 0; g < G; ++g) {
        const float* qg = q + g * d;
        float dot = 0;
#pragma omp simd reduction(+ : dot)
        for (int64_t c = 0; c < d; ++c) dot += qg[c] * k[c];
        scratch[g * keys + t] = dot * scale;
      }
    }
    for (int64_t g = 0; g < G; ++g) softmax_inplace(scratch + g * keys, keys);
    float* o = ch.o_SQ + i * QW + j * G * d;
    std::fill(o, o + G * d, 0.0f);
    for (int64_t t = 0; t < keys; ++t) {
      const float* v = ch.v_cache + t * KW + j * d;
      for (int64_t g = 0; g < G; ++g) {
        const float p = scratch[g * keys + t];
        float* og = o + g * d;
#pragma omp simd
        for (int64_t c = 0; c < d; ++c) og[c] += p * v[c];
      }
    }
  }
}

// Query rows [row0, row0 + 64) of head h: sgemm for the scores and the output.
void block_task(const CachedAttentionChunk& ch, const CachedAttentionShape& s, int64_t h, int64_t row0,
                float* scratch) {
  const int64_t d = s.head_dim, G = s.q_heads / s.kv_heads, QW = s.q_heads * d, KW = s.kv_heads * d;
  const int64_t j = h / G;
  const float scale = 1.0f / std::sqrt(float(d));
  const int64_t row1 = std::min(ch.count, row0 + kQueryBlock), rows = row1 - row0;
  const int64_t keys = ch.past + row1;  // the block's last row sees this many keys
  const float* q = ch.q_SQ + row0 * QW + h * d;
  gemm<float>(false, true, rows, keys, d, scale, q, QW, ch.k_cache + j * d, KW, 0.0f, scratch, keys);
  for (int64_t r = 0; r < rows; ++r) {
    float* p = scratch + r * keys;
    const int64_t valid = ch.past + row0 + r + 1;
    softmax_inplace(p, valid);
    std::fill(p + valid, p + keys, 0.0f);
  }
  gemm<float>(false, false, rows, d, keys, 1.0f, scratch, keys, ch.v_cache + j * d, KW, 0.0f,
              ch.o_SQ + row0 * QW + h * d, QW);
}

}  // namespace

int64_t cached_attention_scratch_floats(int64_t group, int64_t max_context) {
  return std::max(group, kQueryBlock) * max_context;
}

void cached_attention(std::span<const CachedAttentionChunk> chunks, const CachedAttentionShape& s, float* scratch,
                      int64_t per_thread) {
  ZAYA_ASSERT(s.kv_heads >= 1 && s.q_heads % s.kv_heads == 0);
  std::vector<Task> tasks;
  for (size_t ci = 0; ci < chunks.size(); ++ci) {
    const CachedAttentionChunk& ch = chunks[ci];
    ZAYA_ASSERT(cached_attention_scratch_floats(s.q_heads / s.kv_heads, ch.past + ch.count) <= per_thread);
    if (ch.count <= kDecodeRows) {
      for (int64_t j = 0; j < s.kv_heads; ++j) tasks.push_back({int32_t(ci), int32_t(j), -1});
    } else {
      for (int64_t h = 0; h < s.q_heads; ++h)
        for (int64_t r0 = 0; r0 < ch.count; r0 += kQueryBlock) tasks.push_back({int32_t(ci), int32_t(h), r0});
    }
  }
  const int64_t n = int64_t(tasks.size());
#pragma omp parallel for schedule(dynamic, 1) if (n > 1)
  for (int64_t i = 0; i < n; ++i) {
    const Task& t = tasks[i];
    float* mine = scratch + int64_t(omp_get_thread_num()) * per_thread;
    if (t.row0 < 0) rows_task(chunks[t.chunk], s, t.head, mine);
    else block_task(chunks[t.chunk], s, t.head, t.row0, mine);
  }
}

}  // namespace zaya
