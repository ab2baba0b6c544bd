#include "zaya/ops/rmsnorm.h"

#include <cmath>

#include "zaya/ops/parallel_for.h"
#include "zaya/ops/reduce.h"

namespace zaya {

template <typename T>
void rmsnorm_forward(T* out_TD, T* rstd_T, const T* x_TD, const T* w_D, int64_t tokens, int64_t dim, T eps) {
  parallel_for(tokens, 2 * tokens * dim, [&](int64_t t) {
    const T* x = x_TD + t * dim;
    T* y = out_TD + t * dim;
    T ss = 0;
#pragma omp simd reduction(+ : ss)
    for (int64_t i = 0; i < dim; ++i) ss += x[i] * x[i];
    T rstd = T(1) / std::sqrt(ss / T(dim) + eps);
    rstd_T[t] = rstd;
#pragma omp simd
    for (int64_t i = 0; i < dim; ++i) y[i] = x[i] * rstd * w_D[i];
  });
}

template <typename T>
void rmsnorm_backward(T* dx_TD, T* dw_D, const T* dout_TD, const T* x_TD, const T* w_D, const T* rstd_T, int64_t tokens,
                      int64_t dim) {
  // With xhat = x * rstd:  dw += sum_t dout * xhat
  //   dx = rstd * (dout*w - xhat * mean(dout*w*xhat))
  parallel_for(tokens, 3 * tokens * dim, [&](int64_t t) {
    const T* x = x_TD + t * dim;
    const T* dy = dout_TD + t * dim;
    T* dx = dx_TD + t * dim;
    T rstd = rstd_T[t];
    T dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t i = 0; i < dim; ++i) dot += dy[i] * w_D[i] * x[i];
    T c = dot * rstd * rstd / T(dim);
#pragma omp simd
    for (int64_t i = 0; i < dim; ++i) dx[i] += rstd * (dy[i] * w_D[i] - x[i] * c);
  });
  // dw[i] = sum_t dout[t,i] * x[t,i] * rstd[t], column sums in a fixed order.
  column_sum_product(dw_D, dout_TD, x_TD, rstd_T, tokens, dim);
}

template void rmsnorm_forward<float>(float*, float*, const float*, const float*, int64_t, int64_t, float);
template void rmsnorm_forward<double>(double*, double*, const double*, const double*, int64_t, int64_t, double);
template void rmsnorm_backward<float>(float*, float*, const float*, const float*, const float*, const float*, int64_t,
                                      int64_t);
template void rmsnorm_backward<double>(double*, double*, const double*, const double*, const double*, const double*,
                                       int64_t, int64_t);

}  // namespace zaya
