#pragma once
// Element-wise activations with their backward passes.
//   GELU, exact erf form (router MLP, spec §4): gelu(x) = x * Phi(x)
//   SwiGLU (experts, spec §4): out = silu(a) * b with [a; b] = fc1(x), a = the
//   first F columns (gate), b = the next F (up).

#include <cstdint>

namespace zaya {

template <typename T>
void gelu_forward(T* y, const T* x, int64_t n);
// dx += dy * gelu'(x)
template <typename T>
void gelu_backward(T* dx, const T* dy, const T* x, int64_t n);

// out_TF[n, f] = silu(h[n, f]) * h[n, F + f], h_T2F rows of width 2F.
template <typename T>
void swiglu_forward(T* out_TF, const T* h_T2F, int64_t rows, int64_t ffn);
// dh_T2F += d/dh of swiglu given dout_TF.
template <typename T>
void swiglu_backward(T* dh_T2F, const T* dout_TF, const T* h_T2F, int64_t rows, int64_t ffn);

}  // namespace zaya
