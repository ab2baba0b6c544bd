#include "zaya/ops/residual_scale.h"

#include <algorithm>
#include <cmath>

#include "zaya/core/error.h"
#include "zaya/ops/parallel_for.h"

namespace zaya {

template <typename T>
void residual_scale_forward(T* res_out_TD, const T* h_TD, const T* hs_D, const T* hb_D, const T* res_in_TD,
                            const T* rs_D, const T* rb_D, int64_t tokens, int64_t dim) {
  if (hs_D == nullptr) {  // no residual scaling: a plain sum
    parallel_for(tokens, 3 * tokens * dim, [&](int64_t t) {
      const T* h = h_TD + t * dim;
      T* out = res_out_TD + t * dim;
      if (res_in_TD != nullptr) {
        const T* r = res_in_TD + t * dim;
#pragma omp simd
        for (int64_t i = 0; i < dim; ++i) out[i] = h[i] + r[i];
      } else {
        for (int64_t i = 0; i < dim; ++i) out[i] = h[i];
      }
    });
    return;
  }
  parallel_for(tokens, 3 * tokens * dim, [&](int64_t t) {
    const T* h = h_TD + t * dim;
    T* out = res_out_TD + t * dim;
    if (res_in_TD != nullptr) {
      const T* r = res_in_TD + t * dim;
#pragma omp simd
      for (int64_t i = 0; i < dim; ++i) out[i] = (h[i] + hb_D[i]) * hs_D[i] + (r[i] + rb_D[i]) * rs_D[i];
    } else {
#pragma omp simd
      for (int64_t i = 0; i < dim; ++i) out[i] = (h[i] + hb_D[i]) * hs_D[i];
    }
  });
}

template <typename T>
void residual_scale_backward(T* dh_TD, T* dhs_D, T* dhb_D, T* dres_in_TD, T* drs_D, T* drb_D, const T* dres_out_TD,
                             const T* h_TD, const T* hs_D, const T* hb_D, const T* res_in_TD, const T* rs_D,
                             const T* rb_D, int64_t tokens, int64_t dim) {
  const bool has_res = res_in_TD != nullptr;
  if (hs_D == nullptr) {  // a plain sum: the gradient passes to both inputs unchanged
    parallel_for(tokens, 3 * tokens * dim, [&](int64_t t) {
      const T* g = dres_out_TD + t * dim;
      T* dh = dh_TD + t * dim;
#pragma omp simd
      for (int64_t i = 0; i < dim; ++i) dh[i] = g[i];
      if (has_res) {
        T* dr = dres_in_TD + t * dim;
#pragma omp simd
        for (int64_t i = 0; i < dim; ++i) dr[i] = g[i];
      }
    });
    return;
  }
  ZAYA_ASSERT((dhs_D == nullptr) == (dhb_D == nullptr) && (drs_D == nullptr) == (drb_D == nullptr));
  if (dhs_D == nullptr) {  // frozen vectors: only the data gradients, rows split across threads
    parallel_for(tokens, 3 * tokens * dim, [&](int64_t t) {
      const T* g = dres_out_TD + t * dim;
      T* dh = dh_TD + t * dim;
#pragma omp simd
      for (int64_t i = 0; i < dim; ++i) dh[i] = g[i] * hs_D[i];
      if (has_res) {
        T* dr = dres_in_TD + t * dim;
#pragma omp simd
        for (int64_t i = 0; i < dim; ++i) dr[i] = g[i] * rs_D[i];
      }
    });
    return;
  }
  // One pass: columns are split across threads in bands of 16; a thread walks
  // its band in chunks of kChunk columns, token by token, adding to the data
  // gradients and to per-chunk sums of the parameter gradients. Each column's
  // sum runs over tokens in order, whatever the thread count (bit-reproducible),
  // with explicit fused multiply-adds: the product g * hs also feeds dh, and a
  // shared product would otherwise be rounded on its own before the add.
  constexpr int64_t kChunk = 256;
  parallel_region(5 * tokens * dim, [&](int id, int nt) {
    const int64_t blocks = (dim + 15) / 16;
    const int64_t i0 = std::min(dim, blocks * id / nt * 16), i1 = std::min(dim, blocks * (id + 1) / nt * 16);
    alignas(64) T hs_sum[kChunk], hb_sum[kChunk], rs_sum[kChunk], rb_sum[kChunk];
    for (int64_t c0 = i0; c0 < i1; c0 += kChunk) {
      const int64_t n = std::min(kChunk, i1 - c0);
      const T* hs = hs_D + c0;
      const T* hb = hb_D + c0;
      const T* rs = has_res ? rs_D + c0 : nullptr;
      const T* rb = has_res ? rb_D + c0 : nullptr;
      for (int64_t i = 0; i < n; ++i) {
        hs_sum[i] = dhs_D[c0 + i];
        hb_sum[i] = dhb_D[c0 + i];
        rs_sum[i] = drs_D != nullptr ? drs_D[c0 + i] : T(0);
        rb_sum[i] = drb_D != nullptr ? drb_D[c0 + i] : T(0);
      }
      for (int64_t t = 0; t < tokens; ++t) {
        const T* g = dres_out_TD + t * dim + c0;
        const T* h = h_TD + t * dim + c0;
        T* dh = dh_TD + t * dim + c0;
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) {
          hs_sum[i] = std::fma(g[i], h[i] + hb[i], hs_sum[i]);
          hb_sum[i] = std::fma(g[i], hs[i], hb_sum[i]);
          dh[i] = g[i] * hs[i];
        }
        if (!has_res) continue;
        const T* r = res_in_TD + t * dim + c0;
        T* dr = dres_in_TD + t * dim + c0;
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) {
          rs_sum[i] = std::fma(g[i], r[i] + rb[i], rs_sum[i]);
          rb_sum[i] = std::fma(g[i], rs[i], rb_sum[i]);
          dr[i] = g[i] * rs[i];
        }
      }
      for (int64_t i = 0; i < n; ++i) {
        dhs_D[c0 + i] = hs_sum[i];
        dhb_D[c0 + i] = hb_sum[i];
      }
      if (!has_res || drs_D == nullptr) continue;
      for (int64_t i = 0; i < n; ++i) {
        drs_D[c0 + i] = rs_sum[i];
        drb_D[c0 + i] = rb_sum[i];
      }
    }
  });
}

template void residual_scale_forward<float>(float*, const float*, const float*, const float*, const float*,
                                            const float*, const float*, int64_t, int64_t);
template void residual_scale_forward<double>(double*, const double*, const double*, const double*, const double*,
                                             const double*, const double*, int64_t, int64_t);
template void residual_scale_backward<float>(float*, float*, float*, float*, float*, float*, const float*, const float*,
                                             const float*, const float*, const float*, const float*, const float*,
                                             int64_t, int64_t);
template void residual_scale_backward<double>(double*, double*, double*, double*, double*, double*, const double*,
                                              const double*, const double*, const double*, const double*, const double*,
                                              const double*, int64_t, int64_t);

}  // namespace zaya
