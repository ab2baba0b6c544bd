#include "zaya/ops/qk_norm.h"

#include "zaya/ops/parallel_for.h"

#include <cmath>
#include <limits>

namespace zaya {
namespace {
// Clamp of the upstream port: torch.finfo(float32).eps.
constexpr double kNormEps = 1.1920928955078125e-07;
}  // namespace

template <typename T>
void l2norm_heads_forward(T* y, T* inv_norm, const T* x, const T* temp, int64_t tokens, int64_t heads, int64_t d) {
  const T sqrt_d = std::sqrt(T(d));
  parallel_for(tokens, 2 * tokens * heads * d, [&](int64_t t) {
    for (int64_t h = 0; h < heads; ++h) {
      const T* xv = x + (t * heads + h) * d;
      T* yv = y + (t * heads + h) * d;
      T ss = 0;
#pragma omp simd reduction(+ : ss)
      for (int64_t i = 0; i < d; ++i) ss += xv[i] * xv[i];
      T norm = std::sqrt(ss);
      T r = T(1) / (norm > T(kNormEps) ? norm : T(kNormEps));
      inv_norm[t * heads + h] = r;
      T s = sqrt_d * r * (temp != nullptr ? temp[h] : T(1));
#pragma omp simd
      for (int64_t i = 0; i < d; ++i) yv[i] = xv[i] * s;
    }
  });
}

template <typename T>
void l2norm_heads_backward(T* dx, T* dtemp, const T* dy, const T* x, const T* inv_norm, const T* temp, int64_t tokens,
                           int64_t heads, int64_t d) {
  const T sqrt_d = std::sqrt(T(d));
  // y = c * x * r with c = sqrt(d) * temp, r = 1/||x||:
  //   dx = c * r * (dy - xhat (xhat . dy)),  dtemp += sqrt(d) * (xhat . dy)
  // (when the norm is clamped, r is a constant and dx = c * r * dy).
  parallel_for(tokens, 3 * tokens * heads * d, [&](int64_t t) {
    for (int64_t h = 0; h < heads; ++h) {
      const T* xv = x + (t * heads + h) * d;
      const T* g = dy + (t * heads + h) * d;
      T* dxv = dx + (t * heads + h) * d;
      T r = inv_norm[t * heads + h];
      T c = sqrt_d * (temp != nullptr ? temp[h] : T(1));
      T dot = 0;
#pragma omp simd reduction(+ : dot)
      for (int64_t i = 0; i < d; ++i) dot += xv[i] * g[i];
      T xhat_dot = dot * r;  // xhat . dy
      bool clamped = r >= T(1.0 / kNormEps);
      T proj = clamped ? T(0) : xhat_dot * r;  // coefficient of x in the projection
#pragma omp simd
      for (int64_t i = 0; i < d; ++i) dxv[i] += c * r * (g[i] - xv[i] * proj);
    }
  });
  if (dtemp != nullptr) {
    // One head per task, tokens in order: reproducible sums.
    parallel_for(heads, 2 * tokens * heads * d, [&](int64_t h) {
      T acc = 0;
      for (int64_t t = 0; t < tokens; ++t) {
        const T* xv = x + (t * heads + h) * d;
        const T* g = dy + (t * heads + h) * d;
        T dot = 0;
        for (int64_t i = 0; i < d; ++i) dot += xv[i] * g[i];
        acc += dot * inv_norm[t * heads + h];
      }
      dtemp[h] += sqrt_d * acc;
    });
  }
}

template void l2norm_heads_forward<float>(float*, float*, const float*, const float*, int64_t, int64_t, int64_t);
template void l2norm_heads_forward<double>(double*, double*, const double*, const double*, int64_t, int64_t, int64_t);
template void l2norm_heads_backward<float>(float*, float*, const float*, const float*, const float*, const float*,
                                           int64_t, int64_t, int64_t);
template void l2norm_heads_backward<double>(double*, double*, const double*, const double*, const double*,
                                            const double*, int64_t, int64_t, int64_t);

}  // namespace zaya
