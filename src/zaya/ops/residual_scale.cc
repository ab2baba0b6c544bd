#include "zaya/ops/residual_scale.h"

#include <omp.h>

#include <algorithm>

#include "zaya/core/error.h"

namespace zaya {

template <typename T>
void residual_scale_forward(T* res_out_TD, const T* h_TD, const T* hs_D, const T* hb_D, const T* res_in_TD,
                            const T* rs_D, const T* rb_D, int64_t tokens, int64_t dim) {
  if (hs_D == nullptr) {  // no residual scaling: a plain sum
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < tokens; ++t) {
      const T* h = h_TD + t * dim;
      T* out = res_out_TD + t * dim;
      if (res_in_TD != nullptr) {
        const T* r = res_in_TD + t * dim;
#pragma omp simd
        for (int64_t i = 0; i < dim; ++i) out[i] = h[i] + r[i];
      } else {
        for (int64_t i = 0; i < dim; ++i) out[i] = h[i];
      }
    }
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tokens; ++t) {
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
  }
}

template <typename T>
void residual_scale_backward(T* dh_TD, T* dhs_D, T* dhb_D, T* dres_in_TD, T* drs_D, T* drb_D, const T* dres_out_TD,
                             const T* h_TD, const T* hs_D, const T* hb_D, const T* res_in_TD, const T* rs_D,
                             const T* rb_D, int64_t tokens, int64_t dim) {
  const bool has_res = res_in_TD != nullptr;
  if (hs_D == nullptr) {  // a plain sum: the gradient passes to both inputs unchanged
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < tokens; ++t) {
      const T* g = dres_out_TD + t * dim;
      T* dh = dh_TD + t * dim;
#pragma omp simd
      for (int64_t i = 0; i < dim; ++i) dh[i] += g[i];
      if (has_res) {
        T* dr = dres_in_TD + t * dim;
#pragma omp simd
        for (int64_t i = 0; i < dim; ++i) dr[i] += g[i];
      }
    }
    return;
  }
  // Per-channel parameter gradients: columns are split across threads, each
  // column summed over tokens in order (bit-reproducible). Null: frozen, none.
  ZAYA_ASSERT((dhs_D == nullptr) == (dhb_D == nullptr) && (drs_D == nullptr) == (drb_D == nullptr));
#pragma omp parallel if (dhs_D != nullptr)
  if (dhs_D != nullptr) {
    int nt = omp_get_num_threads(), id = omp_get_thread_num();
    int64_t blocks = (dim + 15) / 16;
    int64_t i0 = std::min(dim, blocks * id / nt * 16), i1 = std::min(dim, blocks * (id + 1) / nt * 16);
    for (int64_t t = 0; t < tokens; ++t) {
      const T* g = dres_out_TD + t * dim;
      const T* h = h_TD + t * dim;
      for (int64_t i = i0; i < i1; ++i) {
        dhs_D[i] += g[i] * (h[i] + hb_D[i]);
        dhb_D[i] += g[i] * hs_D[i];
      }
      if (has_res) {
        const T* r = res_in_TD + t * dim;
        for (int64_t i = i0; i < i1; ++i) {
          drs_D[i] += g[i] * (r[i] + rb_D[i]);
          drb_D[i] += g[i] * rs_D[i];
        }
      }
    }
  }
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tokens; ++t) {
    const T* g = dres_out_TD + t * dim;
    T* dh = dh_TD + t * dim;
#pragma omp simd
    for (int64_t i = 0; i < dim; ++i) dh[i] += g[i] * hs_D[i];
    if (has_res) {
      T* dr = dres_in_TD + t * dim;
#pragma omp simd
      for (int64_t i = 0; i < dim; ++i) dr[i] += g[i] * rs_D[i];
    }
  }
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
