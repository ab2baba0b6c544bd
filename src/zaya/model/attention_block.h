#pragma once
// One CCA attention half-layer (spec §3): x (normed input) -> block output.
//   qkv = x [Wq; Wk; Wv1; Wv2]^T        one fused GEMM
//   c   = conv_B(conv_A(leftpad(q|k)))  two causal convolutions
//   Q   = c_q + mq,  K = c_k + mk       q/k mean terms from the unconvolved projections
//   V   = [v_cur(t), v_prev(t - 1)]     two value time streams
//   Q, K <- L2-normalised to sqrt(d) (K times temp), then partial RoPE
//   O   = causal GQA softmax attention;  out = O Wo^T
// A sliding-window block (spec §12, ZayaConfig::is_sliding) masks keys older
// than its window (query i sees keys i-W+1..i) and rotates with its own RoPE
// table (BatchShape::sliding_rope: base sliding_rope_theta, absolute
// positions); the convolutions and the value shift are those of a full block.
// Under context parallelism (shape.cp) the rows are this rank's two chunks of
// each sequence: the convolutions and the value shift read a halo of the
// conv_halo_rows(c) projection rows before each chunk, and attention all-gathers K and V
// (model/context_parallel.h).
// Document masking (shape.doc_pos_T): attention, both convolutions and the
// value shift restart at every document start, and RoPE uses the positions
// inside the documents (model/batch.h); under context parallelism the same
// per-row positions mask the gathered keys and the halo rows.

#include <array>
#include <cstdint>

#include "zaya/core/arena.h"
#include "zaya/model/batch.h"
#include "zaya/model/config.h"
#include "zaya/model/lora.h"
#include "zaya/model/weights.h"
#include "zaya/ops/precision.h"

namespace zaya {

// What the forward pass keeps for backward (per attention half-layer).
struct AttentionActs {
  float* qkv_TP = nullptr;      // fused projection output
  float* conv_a_BUC = nullptr;  // depthwise conv output [B, S + cca_time1 - 1, C]
  float* q_pre_TQ = nullptr;    // before QK norm
  float* k_pre_TK = nullptr;
  float* q_inv_TH = nullptr;  // 1 / ||q|| per head
  float* k_inv_TH = nullptr;
  float* q_TQ = nullptr;  // after norm and RoPE
  float* k_TK = nullptr;
  float* v_TK = nullptr;
  float* lse_BHS = nullptr;    // attention row log-sum-exp
  float* o_TQ = nullptr;       // attention output before o_proj
  float* hist_2B2P = nullptr;  // context parallelism: the conv_halo_rows(c) projection rows before each chunk
  // With bf16 GEMMs (carve_attention_acts' keep_input_bf16): the normed input
  // kept only as the bf16 rounding the fused q/k/v GEMM reads
  // (bf16_padded_rows(T) rows, ops/bf16_linear.h); the x_TD given to the
  // block is then the forward's alone, and the backward does not read it.
  uint16_t* x_bf16_TD = nullptr;
};

// Scratch shared by all attention half-layers (sized for the largest batch).
struct AttentionScratch {
  float* c_TC = nullptr;  // conv output
  float* conv = nullptr;  // 2 * cca_conv_scratch_floats
  float* attn = nullptr;  // attention_scratch_floats
  float* dO_TQ = nullptr;
  float* dq_TQ = nullptr;
  float* dk_TK = nullptr;
  float* dv_TK = nullptr;
  float* dq_pre_TQ = nullptr;
  float* dk_pre_TK = nullptr;
  float* dc_TC = nullptr;
  float* dqkv_TP = nullptr;
  float* da_BUC = nullptr;
  // Frozen convolution taps (null gradient views, model/weights.h): ops/cca_conv
  // always forms the taps' gradients (a few thousand floats per layer), so
  // they land here and are dropped; [C*k0 | C | C*d*k1 | C].
  float* conv_sink = nullptr;
  // Context parallelism only: whole-sequence K/V and their gradients, the
  // gather/scatter staging buffer, halo messages and the halo's gradient.
  float* k_full_BSK = nullptr;
  float* v_full_BSK = nullptr;
  float* dk_full_BSK = nullptr;
  float* dv_full_BSK = nullptr;
  float* stage = nullptr;  // 2 * B * S * K
  float* halo_send = nullptr;
  float* halo_recv = nullptr;
  float* dhist_2B2P = nullptr;
};

// Lay the buffers out in `arena` (or count them, on Arena::measuring()).
// seq: rows per sequence on this rank; cp: 0 without context parallelism,
// else the ranks of the cp group (the whole sequence has seq * cp tokens).
void carve_attention_acts(AttentionActs& a, const ZayaConfig& c, int64_t batch, int64_t seq, Arena& arena, int cp = 0,
                          bool keep_input_bf16 = false);
void carve_attention_scratch(AttentionScratch& s, const ZayaConfig& c, int64_t batch, int64_t seq, int threads,
                             Arena& arena, int cp = 0);

// out_TD = block(x_TD) for block `block` (0 .. num_blocks - 1: its window and RoPE base),
// its products in `precision` (ops/precision.h).
// lora: the block's adapters (model/lora.h), whose attention targets add their branches; null: none.
void attention_block_forward(const ZayaConfig& c, const Precision& precision, int64_t block, const AttentionWeights& w,
                             AttentionActs& a, AttentionScratch& s, const BatchShape& shape, const float* x_TD,
                             float* out_TD, const BlockLora* lora = nullptr);

// Adds into dx_TD and the parameter gradients g.
void attention_block_backward(const ZayaConfig& c, const Precision& precision, int64_t block, const AttentionWeights& w,
                              const AttentionWeights& g, const AttentionActs& a, AttentionScratch& s,
                              const BatchShape& shape, const float* x_TD, const float* dout_TD, float* dx_TD,
                              const BlockLora* lora = nullptr);

}  // namespace zaya
