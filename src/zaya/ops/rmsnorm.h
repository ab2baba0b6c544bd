#pragma once
// RMSNorm (Zhang & Sennrich 2019), the Llama/T5 form of spec §5:
//   y = x * rsqrt(mean(x^2) + eps) * w
// computed in the working precision (float here, which is the spec's fp32).

#include <cstdint>

namespace zaya {

// out_TD = rmsnorm(x_TD) * w_D; stores rstd_T = 1/sqrt(mean(x^2)+eps) for backward.
template <typename T>
void rmsnorm_forward(T* out_TD, T* rstd_T, const T* x_TD, const T* w_D, int64_t tokens, int64_t dim, T eps);

// Adds the gradients into dx_TD and dw_D (null: a frozen weight, model/weights.h; only dx_TD).
template <typename T>
void rmsnorm_backward(T* dx_TD, T* dw_D, const T* dout_TD, const T* x_TD, const T* w_D, const T* rstd_T, int64_t tokens,
                      int64_t dim);

}  // namespace zaya
