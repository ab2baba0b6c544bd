#pragma once
// Sliding-window attention in the planner (spec §12): on a sliding block of
// window W query i of a sequence sees min(W, i + 1) keys, so its attention
// FLOPs grow as S x W instead of S^2 / 2, and a decoder holds a ring of W - 1
// keys and values instead of the whole context.

#include <cstdint>
#include <vector>

#include "zaya/bench/gemm_shapes.h"
#include "zaya/model/config.h"

namespace zaya {

// Sum over the S queries of one sequence of the keys each sees (window 0: full causal, S (S + 1) / 2).
double attended_keys(int64_t seq_len, int64_t window);

// Forward attention FLOPs (scores and values, 4 x q_width per query-key pair) of B sequences of S tokens, summed
// over the blocks with each block's window.
double attention_forward_flops(const ZayaConfig& c, int64_t micro_batch, int64_t seq_len);

// model_forward_flops (model/model.h) with each block's window: the full-attention count of the same shapes, less
// what the windows save.
double windowed_forward_flops(const ZayaConfig& c, int64_t micro_batch, int64_t seq_len, double routed_rows);

// Tokens of KV cache a decoder holds per sequence at `context` tokens, summed over the blocks: context on a full
// block, min(context, W - 1) (the ring) on a sliding one.
double kv_cache_tokens(const ZayaConfig& c, int64_t context);

// Keys a decode step at `context` tokens reads per sequence, summed over the blocks: context + 1, or min(context +
// 1, W).
double decode_attended_keys(const ZayaConfig& c, int64_t context);

}  // namespace zaya
