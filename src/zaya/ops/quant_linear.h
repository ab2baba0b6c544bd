#pragma once
// Linear layers over frozen weights held quantized (a QLoRA base,
// docs/training.md "LoRA over a quantized base"): the routed experts' fc1 and
// fc2 of a LoRA run kept as packed MXFP4, FP8 or int8 rows (the rows of
// ops/matvec.h's WeightType, the very bytes the decoder runs), and their
// products formed from them without a float32 copy of the matrix:
//
//   forward   y_TO (+)= x_TI W^T
//   backward  dx_TI += dy_TO W        (no weight gradient: the base is frozen)
//
// with W the exact dequantization of the rows (weight_row_f32: E2M1 x 2^(u-127),
// E4M3 x scale and int8 x f16 scale are exact in float32). Rows are decoded a
// tile at a time (at most kQuantTileFloats values, a few hundred rows) into the
// context's scratch and multiplied by ops/matmul.h's float32 gemm, so each
// result is the float32 product with the dequantized matrix, up to the order of
// the float additions (the backward sums over the tiles one after another):
// the model's forward and backward are those of a float32 base holding the
// dequantized values (ops/quant_linear_test.cc, model/qlora_test.cc).
//
// The model binds these matrices by the address of their float32 views, as a
// bf16 base binds its copy (ops/precision.h): QuantWeights::rows_of finds a
// view's packed rows; linear_forward / linear_backward given a Precision with a
// QuantContext take this path for such a weight (ops/matmul.h).

#include <cstdint>
#include <vector>

#include "zaya/core/arena.h"
#include "zaya/ops/matvec.h"

namespace zaya {

// Floats of one dequantized tile (1 MiB).
inline constexpr int64_t kQuantTileFloats = int64_t(1) << 18;

// Frozen matrices held as packed rows of one type, each found by the address range of its float32 view (a view
// that is never read: model/frozen_base.h keeps it without memory).
struct QuantWeights {
  struct Matrix {
    const float* f32 = nullptr;  // the view's first element
    int64_t rows = 0, cols = 0;
    const uint8_t* packed = nullptr;  // rows x weight_row_bytes(type, cols) bytes
  };
  WeightType type = WeightType::kF32;
  std::vector<Matrix> matrices;  // sorted by f32 (add them in address order or call sort())

  void sort();
  // The packed rows from view element w on (a row start of a matrix with `cols` columns), or null when w lies in
  // no matrix. A w inside a matrix but not at a row start, or of other columns, is an internal error.
  const uint8_t* rows_of(const float* w, int64_t cols) const;
};

// What one pass needs besides the operands: the weights and the tile scratch (one pass at a time, one thread
// calling; the tile is decoded with OpenMP).
class QuantContext {
 public:
  explicit QuantContext(const QuantWeights* weights = nullptr) : weights_(weights) {}
  void set_weights(const QuantWeights* weights) { weights_ = weights; }
  const QuantWeights* weights() const { return weights_; }
  // Packed rows of w (QuantWeights::rows_of), null without weights.
  const uint8_t* rows_of(const float* w, int64_t cols) const {
    return weights_ != nullptr ? weights_->rows_of(w, cols) : nullptr;
  }
  GrowBuffer<float> tile;

 private:
  const QuantWeights* weights_;
};

// y_TO (+)= x_TI W^T, W `out` packed rows of `in` values of `type`.
void quant_linear_forward(QuantContext& ctx, WeightType type, float* y_TO, const float* x_TI, const uint8_t* w,
                          int64_t tokens, int64_t in, int64_t out, bool accumulate);
// dx_TI += dy_TO W.
void quant_linear_backward(QuantContext& ctx, WeightType type, float* dx_TI, const float* dy_TO, const uint8_t* w,
                           int64_t tokens, int64_t in, int64_t out);

// n floats into one packed row of `type`: kMXFP4 (core/mxfp4.h), kFP8 with one scale per row (core/fp8.h's
// channel quantization), kI8 (ggml's Q8_0 in the split layout, core/q8_0.h). The decoder's --dtype mxfp4 / fp8
// quantize with this too (infer/infer_model_builder.cc), so a base quantized at load holds the server's values.
void quantize_weight_row(WeightType type, const float* x, int64_t n, uint8_t* dst);

}  // namespace zaya
