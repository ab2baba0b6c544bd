#pragma once
// CCA's QK normalisation (spec §3 step 6): each head vector is scaled to L2
// norm sqrt(d), keys additionally multiplied by a learned per-KV-head
// temperature (plain multiply, ZAYA1's linear form):
//   y = x * sqrt(d) / max(||x||, eps) * temp[h]
// The reference has no epsilon; we clamp the norm at float epsilon as the
// upstream port does (spec §8.3), which only matters for an all-zero head.

#include <cstdint>

namespace zaya {

// y_THd and x_THd: rows of heads*d. temp_H may be null (treated as all ones).
// inv_norm_TH keeps 1 / max(||x||, eps) for backward.
template <typename T>
void l2norm_heads_forward(T* y_THd, T* inv_norm_TH, const T* x_THd, const T* temp_H, int64_t tokens, int64_t heads,
                          int64_t d);

// Adds into dx_THd and (when temp_H is given) dtemp_H.
template <typename T>
void l2norm_heads_backward(T* dx_THd, T* dtemp_H, const T* dy_THd, const T* x_THd, const T* inv_norm_TH,
                           const T* temp_H, int64_t tokens, int64_t heads, int64_t d);

}  // namespace zaya
