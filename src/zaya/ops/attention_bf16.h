#pragma once
// The attention core of ops/attention.h with bf16 GEMMs, for mixed-precision
// training (train.precision = "bf16", docs/model.md "Precision"). Same math,
// same query blocks, same causal / window / context-parallel masks; the
// operands of the five products (Q K^T, P V, dO V^T, dS K, dS^T Q, P^T dO) are
// rounded to bf16 and run as oneDNN batched matmuls over every (sequence, KV
// head) at once (K and V broadcast over the G query heads of their group),
// with float32 accumulation and float32 results. The softmax, its row maximum
// and log-sum-exp, D = rowsum(dO * O), and the gradients added into dq / dk /
// dv stay float32.
//
// Per query block: Q (and dO) rows gathered into bf16 [B, Hq, R, d]; the block's
// keys copied from the layer's bf16 K and V [B, Hk, Sk, d] into dense
// [B, Hk, N, d] slices (oneDNN's AMX kernels want dense batches); scores
// [B, Hq, R, N] in float32; P (and dS) in bf16. Scratch and GEMMs are the
// caller's Bf16Context (ops/precision.h): grow-only, reserved before the step
// loop (reserve_attention_bf16_scratch).
//
// Document masking gives every sequence its own block bounds: those shapes
// keep the float32 kernel (attention_bf16_supports).

#include "zaya/ops/attention.h"
#include "zaya/ops/precision.h"

namespace zaya {

// True when the bf16 kernel takes this shape (no document masking).
bool attention_bf16_supports(const AttentionShape& s);

// Sizes the scratch for this shape (and any with fewer sequences, rows or keys).
void reserve_attention_bf16_scratch(Bf16Context& ctx, const AttentionShape& s);

// q_TQ [B*S, Hq*d], k_TK / v_TK [B*keys, Hk*d]; writes o_TQ and lse_BHS [B, Hq, S].
void attention_forward_bf16(Bf16Context& ctx, float* o_TQ, float* lse_BHS, const float* q_TQ, const float* k_TK,
                            const float* v_TK, const AttentionShape& shape);

// Adds into dq_TQ, dk_TK, dv_TK (dk/dv: [B*keys, Hk*d]).
void attention_backward_bf16(Bf16Context& ctx, float* dq_TQ, float* dk_TK, float* dv_TK, const float* do_TQ,
                             const float* q_TQ, const float* k_TK, const float* v_TK, const float* o_TQ,
                             const float* lse_BHS, const AttentionShape& shape);

}  // namespace zaya
