#pragma once
// The low-rank adapter branch of a LoRA linear layer (Hu et al. 2021; PEFT's
// `lora.Linear`, docs/training.md "LoRA"):
//
//   y_TO += scale * (drop(x_TI) A_rI^T) B_Or^T,   scale = alpha / rank
//
// added to the output of the frozen base layer y = x W^T. drop() is inverted
// dropout on the adapter's input only: x[t, i] / (1 - p) where the Philox
// value uniform01(seed, stream, t * in + i) >= p, else 0. The mask depends only
// on (seed, stream, position), so a run is bit-reproducible and resumable
// and backward regenerates it instead of storing it.
//
// The output may be a column slice of a wider matrix (a fused projection):
// out_stride is the row stride of y_TO and dy_TO.

#include <cstdint>

namespace zaya {

struct LoraShape {
  int64_t tokens = 0;
  int64_t in = 0;
  int64_t out = 0;
  int64_t rank = 0;
  int64_t out_stride = 0;  // row stride of y / dy (>= out)
  double scale = 1.0;      // alpha / rank
  double dropout = 0.0;    // p in [0, 1)
  uint64_t seed = 0;       // dropout mask: Philox key ...
  uint64_t stream = 0;     // ... and stream (the caller makes it unique per step, micro-batch, layer, target)
};

// Floats of scratch lora_forward needs (the dropped input; 0 without dropout).
int64_t lora_forward_scratch_floats(const LoraShape& s);
// Floats of scratch lora_backward needs (the dropped input and d(x A^T)).
int64_t lora_backward_scratch_floats(const LoraShape& s);

// y_TO += scale * drop(x_TI) A^T B^T; keeps h_Tr = drop(x_TI) A^T for backward.
template <typename T>
void lora_forward(T* y_TO, T* h_Tr, const T* x_TI, const T* a_rI, const T* b_Or, const LoraShape& s, T* scratch);

// Adds into dx_TI (may be null), da_rI and db_Or the gradients of the forward above.
template <typename T>
void lora_backward(T* dx_TI, T* da_rI, T* db_Or, const T* dy_TO, const T* x_TI, const T* h_Tr, const T* a_rI,
                   const T* b_Or, const LoraShape& s, T* scratch);

// w_OI += scale * B_Or A_rI (merging an adapter into its base weight).
template <typename T>
void lora_merge(T* w_OI, const T* a_rI, const T* b_Or, int64_t in, int64_t out, int64_t rank, double scale);

}  // namespace zaya
