#pragma once
// Causal softmax attention with grouped KV heads (spec §3 step 8):
//   O_h = softmax(Q_h K_j^T / sqrt(d) + causal mask) V_j,  j = h / (Hq / Hk)
// Sliding-window layers (spec §12) pass a window W > 0: query i then sees keys
// i - W + 1 .. i only (W counts the query itself; W >= the sequence is full
// causal attention). Key blocks outside every row's window are not computed.
// Context parallelism (issue [cp]) gives a rank some query rows of each
// sequence and all its keys: then q_pos names each query row's position in the
// sequence (strictly increasing) and key c is visible to row i when
// q_pos[i] - W + 1 <= c <= q_pos[i] (c <= q_pos[i] without a window).
// Document masking (data.document_masking, docs/training.md): doc_pos gives
// each query row (b, i) its position inside its document, so the document
// began at key q_pos[i] - doc_pos[b * seq + i]; keys before that are masked
// too (block-diagonal causal attention). Query blocks end at document starts,
// so a block computes only the keys of its own document.
// Queries are processed in blocks so the masked upper triangle is mostly
// skipped; probabilities are not stored: the backward pass recomputes them from
// the saved row log-sum-exp (as FlashAttention does), so memory is O(T * H).

#include <algorithm>
#include <cstdint>

namespace zaya {

struct AttentionShape {
  int64_t batch = 0, seq = 0, q_heads = 0, kv_heads = 0, head_dim = 0;
  int64_t kv_seq = 0;                // keys per sequence (0: seq)
  const int32_t* q_pos = nullptr;    // position of each of the seq query rows (null: 0..seq-1)
  int64_t window = 0;                // sliding window W (keys pos-W+1..pos); 0: full causal
  const int32_t* doc_pos = nullptr;  // [batch * seq] position of each query row in its document (null: no masking)
  int64_t keys() const { return kv_seq > 0 ? kv_seq : seq; }
  int64_t pos(int64_t i) const { return q_pos != nullptr ? q_pos[i] : i; }
  int64_t q_width() const { return q_heads * head_dim; }
  int64_t kv_width() const { return kv_heads * head_dim; }
  // The first key row i of sequence b may see.
  int64_t first_key(int64_t b, int64_t i) const {
    const int64_t w = window > 0 ? std::max<int64_t>(0, pos(i) - window + 1) : 0;
    return doc_pos != nullptr ? std::max<int64_t>(w, pos(i) - doc_pos[b * seq + i]) : w;
  }
};

inline constexpr int64_t kAttentionQueryBlock = 64;

// The query block starting at row i0 of sequence b ends before the returned
// row: at most kAttentionQueryBlock rows; with a window also at most that many
// positions, so a block never straddles the gap between two context-parallel
// chunks and its keys stay within W + kAttentionQueryBlock - 1. Under document
// masking a block also ends before the next document start (doc_pos 0).
// Without document masking the bounds are the same for every sequence.
int64_t attention_query_block_end(const AttentionShape& s, int64_t b, int64_t i0);

// Scratch floats for `threads` OpenMP threads.
inline int64_t attention_scratch_floats(const AttentionShape& s, int threads) {
  return int64_t(threads) * 2 * kAttentionQueryBlock * s.keys();
}

// q_TQ [B*S, Hq*d], k_TK / v_TK [B*keys, Hk*d]; writes o_TQ and lse_BHS [B, Hq, S].
template <typename T>
void attention_forward(T* o_TQ, T* lse_BHS, const T* q_TQ, const T* k_TK, const T* v_TK, const AttentionShape& shape,
                       T* scratch);

// Adds into dq_TQ, dk_TK, dv_TK (dk/dv: [B*keys, Hk*d]).
template <typename T>
void attention_backward(T* dq_TQ, T* dk_TK, T* dv_TK, const T* do_TQ, const T* q_TQ, const T* k_TK, const T* v_TK,
                        const T* o_TQ, const T* lse_BHS, const AttentionShape& shape, T* scratch);

}  // namespace zaya
