#pragma once
// The precision of one forward or backward pass, an explicit argument of the
// ops that have a bf16 path (docs/model.md "Precision"), as autocast's
// explicit context is in PyTorch, but passed rather than ambient:
//
//   Precision{}            float32 GEMMs everywhere;
//   Precision{&context}    mixed precision: every linear layer whose weight
//                          lies in context's weight arena runs with bf16
//                          operands (ops/bf16_linear.h), and so do the
//                          attention core (ops/attention_bf16.h) and the
//                          grouped convolution's products (ops/cca_conv_bf16.h).
//
// A Bf16Context holds everything such a pass needs besides its operands: the
// bf16 copy of the weights (owned by the model), the grow-only conversion and
// staging scratch of the three bf16 ops, and the oneDNN primitives built for
// each GEMM shape. One lives in each workspace (the training model's
// ModelWorkspace); nothing of it is process-wide, so two models, or a trainer
// and a decoder, run in one process without sharing state: each gets the bits
// it gets alone. A context serves one pass at a time (one thread).

#include <cstdint>

#include "zaya/core/arena.h"
#include "zaya/ops/matmul_bf16.h"

namespace zaya {

// A float32 arena of `count` floats and its bf16 copy at the same offsets.
struct Bf16Weights {
  const float* f32 = nullptr;
  int64_t count = 0;
  const uint16_t* bf16 = nullptr;
  // The bf16 copy of w, or null when w is not inside the arena.
  const uint16_t* copy_of(const float* w) const { return (w >= f32 && w < f32 + count) ? bf16 + (w - f32) : nullptr; }
};

// Scratch of the bf16 linear layers (ops/bf16_linear.cc): the rounded operand
// of a forward or the output gradient (a), the rounded input of a weight
// gradient (b), the staged last block of rows (tail, float32).
struct LinearBf16Scratch {
  GrowBuffer<uint16_t> a, b;
  GrowBuffer<float> tail;
};

// Scratch of the bf16 attention core (ops/attention_bf16.cc): the layer-wide
// bf16 K and V [B, Hk, Sk, d]; per query block the keys' dense slices
// [B, Hk, N, d], Q and dO rows [B, Hq, R, d], scores and dP [B, Hq, R, N]
// (float32), P and dS (bf16), the block's O or dQ [B, Hq, R, d] and its dK,
// dV [B, Hk, N, d] (float32).
struct AttentionBf16Scratch {
  GrowBuffer<uint16_t> k, v, k_blk, v_blk, q_blk, do_blk, p_blk, ds_blk;
  GrowBuffer<float> s_blk, dp_blk, out_blk, dk_blk, dv_blk;
};

// Scratch of conv B in bf16 (ops/cca_conv_bf16.cc): the taps [k1][G][d][d],
// conv A's output [G, B, P, d] and conv B's output gradient [G, B, S, d]
// regrouped in bf16; one tap's rows of conv A [G, B, S, d]; one tap's
// product [G, B, rows, d] in float32.
struct ConvBf16Scratch {
  GrowBuffer<uint16_t> taps, grouped, gradient, shifted;
  GrowBuffer<float> product;
};

class Bf16Context {
 public:
  // weights: the arena whose matrices run in bf16 (its owner keeps it alive
  // and refreshes its copy); null: none yet (set_weights).
  explicit Bf16Context(const Bf16Weights* weights = nullptr) : weights_(weights) {}

  void set_weights(const Bf16Weights* weights) { weights_ = weights; }
  const Bf16Weights* weights() const { return weights_; }
  // The bf16 copy of w, or null when w is not one of the weights.
  const uint16_t* copy_of(const float* w) const { return weights_ != nullptr ? weights_->copy_of(w) : nullptr; }
  // The same for a caller that runs only in bf16 (an input kept in bf16): an
  // internal error when w has no copy.
  const uint16_t* required_copy_of(const float* w) const;

  Bf16GemmCache gemms;
  LinearBf16Scratch linear;
  AttentionBf16Scratch attention;
  ConvBf16Scratch conv;

 private:
  const Bf16Weights* weights_;
};

class QuantContext;  // ops/quant_linear.h

struct Precision {
  Bf16Context* bf16 = nullptr;  // null: float32 GEMMs
  // Frozen matrices held quantized (a QLoRA base, ops/quant_linear.h): a linear layer whose weight is one of them
  // runs over its dequantized tiles, ahead of the bf16 rule. Null: none.
  QuantContext* quant = nullptr;
  bool bf16_gemms() const { return bf16 != nullptr; }
};

}  // namespace zaya
