#pragma once
// The adapted linear layer: a matrix product of a training block with its
// optional LoRA branch (docs/training.md "LoRA"), applied by one helper as
// llama.cpp's build_lora_mm applies an adapter at every matmul:
//
//   y_TO = x_TI W_OI^T + scale * drop(x_TI) A_rI^T B_Or^T
//
// The branch is ops/lora_linear.h's op (dropout, its Philox mask, the kept
// h = drop(x) A^T); this helper only chooses where it goes, so every block
// adds adapters the same way and in the same float order: the base product
// first, then the branch into the same output. Where the block computes the
// base product itself (the fused q/k/v projection, a bf16 product, the
// router op's products), it adds the branch alone with lora_branch_forward /
// lora_branch_backward.
//
// model/lora_branch.h binds a block's adapters (BlockLora) for one target,
// dense or one expert's rows.

#include <cstdint>

#include "zaya/ops/lora_linear.h"
#include "zaya/ops/precision.h"

namespace zaya {

// One target's adapter for one product. Null a_rI: the matrix carries no
// adapter (the helpers then compute the base product alone).
template <typename T>
struct LoraBranch {
  const T* a_rI = nullptr;  // [rank, in]
  const T* b_Or = nullptr;  // [out, rank]
  T* da_rI = nullptr;       // their gradients (backward only; added into)
  T* db_Or = nullptr;
  T* h_Tr = nullptr;     // drop(x) A^T, written by forward, read by backward
  T* scratch = nullptr;  // lora_backward_scratch_floats(shape)
  LoraShape shape;       // when adapted (out_stride: the row stride of y)
  // The target's first column in y (a row range of a fused weight): y + row_offset.
  int64_t row_offset = 0;
  bool adapted() const { return a_rI != nullptr; }
};

// y_TO = x_TI W^T (ops/matmul.h linear_forward in `precision`, its
// arguments), then the branch added (over the same rows, y's own columns: no
// fused slice; the branch runs in T).
template <typename T>
void adapted_linear_forward(const Precision& precision, T* y_TO, const T* x_TI, const T* w_OI, int64_t tokens,
                            int64_t in, int64_t out, const LoraBranch<T>& lora);

// Adds into dx_TI (may be null) dy W and the branch's input gradient, into
// dw_OI (null: a frozen weight) dy^T x, and into the adapter's gradients.
template <typename T>
void adapted_linear_backward(const Precision& precision, T* dx_TI, T* dw_OI, const T* dy_TO, const T* x_TI,
                             const T* w_OI, int64_t tokens, int64_t in, int64_t out, const LoraBranch<T>& lora);

// The branch alone, over a base product the caller made: y (row stride
// shape.out_stride) += scale * drop(x) A^T B^T in columns row_offset.. of y.
template <typename T>
void lora_branch_forward(T* y, const T* x_TI, const LoraBranch<T>& lora);

// Its backward: dy read from the same columns; adds into dx_TI (may be null) and the adapter's gradients.
template <typename T>
void lora_branch_backward(T* dx_TI, const T* dy, const T* x_TI, const LoraBranch<T>& lora);

}  // namespace zaya
