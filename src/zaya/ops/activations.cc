#include "zaya/ops/activations.h"

#include <cmath>

#include "zaya/core/erf_f32.h"
#include "zaya/core/exp_f32.h"
#include "zaya/ops/parallel_for.h"

namespace zaya {

namespace {
constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
}  // namespace

template <typename T>
void gelu_forward(T* y, const T* x, int64_t n) {
  parallel_for_simd(n, 2 * n, [&](int64_t i) { y[i] = x[i] * T(0.5) * (T(1) + erf_of(x[i] * T(kInvSqrt2))); });
}

template <typename T>
void gelu_backward(T* dx, const T* dy, const T* x, int64_t n) {
  // gelu'(x) = Phi(x) + x * phi(x)
  parallel_for_simd(n, 3 * n, [&](int64_t i) {
    T cdf = T(0.5) * (T(1) + erf_of(x[i] * T(kInvSqrt2)));
    T pdf = T(kInvSqrt2Pi) * exp_of(T(-0.5) * x[i] * x[i]);
    dx[i] += dy[i] * (cdf + x[i] * pdf);
  });
}

template <typename T>
void swiglu_forward(T* out_TF, const T* h_T2F, int64_t rows, int64_t ffn) {
  parallel_for(rows, 3 * rows * ffn, [&](int64_t r) {
    const T* a = h_T2F + r * 2 * ffn;
    const T* b = a + ffn;
    T* o = out_TF + r * ffn;
#pragma omp simd
    for (int64_t f = 0; f < ffn; ++f) o[f] = a[f] / (T(1) + exp_of(-a[f])) * b[f];
  });
}

template <typename T>
void swiglu_backward(T* dh_T2F, const T* dout_TF, const T* h_T2F, int64_t rows, int64_t ffn) {
  // silu(a) = a*s, s = sigmoid(a); silu'(a) = s * (1 + a * (1 - s))
  parallel_for(rows, 5 * rows * ffn, [&](int64_t r) {
    const T* a = h_T2F + r * 2 * ffn;
    const T* b = a + ffn;
    const T* g = dout_TF + r * ffn;
    T* da = dh_T2F + r * 2 * ffn;
    T* db = da + ffn;
#pragma omp simd
    for (int64_t f = 0; f < ffn; ++f) {
      T s = T(1) / (T(1) + exp_of(-a[f]));
      da[f] += g[f] * b[f] * s * (T(1) + a[f] * (T(1) - s));
      db[f] += g[f] * a[f] * s;
    }
  });
}

template void gelu_forward<float>(float*, const float*, int64_t);
template void gelu_forward<double>(double*, const double*, int64_t);
template void gelu_backward<float>(float*, const float*, const float*, int64_t);
template void gelu_backward<double>(double*, const double*, const double*, int64_t);
template void swiglu_forward<float>(float*, const float*, int64_t, int64_t);
template void swiglu_forward<double>(double*, const double*, int64_t, int64_t);
template void swiglu_backward<float>(float*, const float*, const float*, int64_t, int64_t);
template void swiglu_backward<double>(double*, const double*, const double*, int64_t, int64_t);

}  // namespace zaya
