#pragma once
// The element-wise parts of CCA around the convolutions (spec §3 steps 2, 4, 5):
//
// q/k mean terms, from the UNconvolved projections (G = Hq / Hk query heads per KV head):
//   mq[h] = (q[h] + k[h / G]) / 2
//   mk[j] = (mean_g q[G j + g] + k[j]) / 2
// added to the conv output: Q = conv_q + mq, K = conv_k + mk.
//
// Values: two time streams, V[t] = concat(v_cur[t], v_prev[t - 1]) viewed as
// [Hk, d] (v_prev[-1] = 0 at each sequence start), so with Hk = 2 KV head 0 is
// the current-token stream and KV head 1 the previous-token stream.
// Document masking (doc_pos, data.document_masking): v_prev[t - 1] is also
// zero at every document start (doc_pos[t] = 0), exactly as at a sequence start.

#include <algorithm>
#include <cstdint>

namespace zaya {

struct CcaMixShape {
  int64_t batch = 0, seq = 0, q_heads = 0, kv_heads = 0, head_dim = 0;
  int64_t in_stride = 0;             // row stride of the fused projection (q | k | v_cur | v_prev)
  int64_t hist_rows = 2;             // rows per sequence of hist_B2P (the last gives v_prev[-1])
  const int32_t* doc_pos = nullptr;  // document masking: [batch * seq] position of each row in its document
  bool doc_start(int64_t row) const { return doc_pos != nullptr && doc_pos[row] == 0; }
  int64_t q_width() const { return q_heads * head_dim; }
  int64_t kv_width() const { return kv_heads * head_dim; }
};

// q_TQ = c[:, :Q] + mq, k_TK = c[:, Q:] + mk, with c_TC the conv output and the
// raw q/k taken from the fused projection qkv (row stride in_stride).
template <typename T>
void cca_mean_terms_forward(T* q_TQ, T* k_TK, const T* c_TC, const T* qkv, const CcaMixShape& s);
// Given dq_TQ, dk_TK: writes dc_TC (the conv output's gradient) and adds the
// mean terms' contribution into dqkv[:, :Q + K].
template <typename T>
void cca_mean_terms_backward(T* dc_TC, T* dqkv, const T* dq_TQ, const T* dk_TK, const CcaMixShape& s);

// One row of V: [v_cur(t), v_prev(t - 1)], halves of K/2 each; a null
// prev_half is a sequence start (zeros). Training (cca_values_forward) and the
// cached decoder (infer/engine.cc, v_prev from its state) both build V with this.
template <typename T>
inline void cca_value_row(T* v_K, const T* cur_half, const T* prev_half, int64_t half) {
  std::copy(cur_half, cur_half + half, v_K);
  if (prev_half != nullptr) {
    std::copy(prev_half, prev_half + half, v_K + half);
  } else {
    std::fill(v_K + half, v_K + 2 * half, T(0));
  }
}

// v_TK from the fused projection's value columns (after q and k). hist_B2P
// (context parallelism, issue [cp]): the hist_rows fused-projection rows before
// each sequence, the last giving v_prev[-1]; null means zeros (a sequence start).
template <typename T>
void cca_values_forward(T* v_TK, const T* qkv, const CcaMixShape& s, const T* hist_B2P = nullptr);
// Adds dv_TK back into dqkv's value columns (the delayed stream one step
// earlier), and the first row's delayed-stream gradient into dhist_B2P when given.
template <typename T>
void cca_values_backward(T* dqkv, const T* dv_TK, const CcaMixShape& s, T* dhist_B2P = nullptr);

}  // namespace zaya
