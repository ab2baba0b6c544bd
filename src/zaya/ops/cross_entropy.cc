#include "zaya/ops/cross_entropy.h"

#include <algorithm>
#include <cmath>

#include "zaya/core/bf16.h"
#include "zaya/core/exp_f32.h"
#include "zaya/ops/parallel_for.h"
#include "zaya/ops/row_max.h"

namespace zaya {

template <typename T>
T cross_entropy_row(const T* z, int32_t target, int64_t real_vocab, T* lse_out) {
  const T mx = row_max(z, real_vocab);
  T sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t v = 0; v < real_vocab; ++v) sum += exp_of(z[v] - mx);
  const T lse = mx + std::log(sum);
  if (lse_out != nullptr) *lse_out = lse;
  return target >= 0 ? lse - z[target] : T(0);
}

template <typename T>
void cross_entropy_forward(T* loss_T, T* lse_T, const T* logits, const int32_t* targets, int64_t tokens, int64_t vocab,
                           int64_t real_vocab) {
  parallel_for(tokens, tokens * vocab, [&](int64_t t) {
    loss_T[t] = cross_entropy_row(logits + t * vocab, targets[t], real_vocab, &lse_T[t]);
  });
}

namespace {

// dlogits = store(grad_scale * (softmax - onehot)): float32 as it is, or rounded to bf16 as it is written.
template <typename T, typename Out, typename Store>
void cross_entropy_gradient(Out* dlogits, const T* logits, const T* lse_T, const int32_t* targets, int64_t tokens,
                            int64_t vocab, int64_t real_vocab, T grad_scale, const T* row_scale, Store store) {
  parallel_for(tokens, tokens * vocab, [&](int64_t t) {
    const T scale = row_scale != nullptr ? grad_scale * row_scale[t] : grad_scale;
    const T* z = logits + t * vocab;
    Out* dz = dlogits + t * vocab;
    const int32_t target = targets[t];
    if (target < 0) {
      std::fill(dz, dz + vocab, Out(0));
      return;
    }
    const T lse = lse_T[t];
#pragma omp simd
    for (int64_t v = 0; v < real_vocab; ++v) {
      const T p = exp_of(z[v] - lse) * scale;
      dz[v] = store(v == target ? p - scale : p);
    }
    for (int64_t v = real_vocab; v < vocab; ++v) dz[v] = Out(0);
  });
}

}  // namespace

template <typename T>
void cross_entropy_backward(T* dlogits, const T* logits, const T* lse_T, const int32_t* targets, int64_t tokens,
                            int64_t vocab, int64_t real_vocab, T grad_scale, const T* row_scale_T) {
  cross_entropy_gradient(dlogits, logits, lse_T, targets, tokens, vocab, real_vocab, grad_scale, row_scale_T,
                         [](T x) { return x; });
}

void cross_entropy_backward_bf16(uint16_t* dlogits, const float* logits, const float* lse_T, const int32_t* targets,
                                 int64_t tokens, int64_t vocab, int64_t real_vocab, float grad_scale,
                                 const float* row_scale_T) {
  cross_entropy_gradient(dlogits, logits, lse_T, targets, tokens, vocab, real_vocab, grad_scale, row_scale_T,
                         [](float x) { return float_to_bf16(x); });
}

template <typename T>
void softmax_rows(T* p, const T* x, int64_t rows, int64_t n) {
  parallel_for(rows, 3 * rows * n, [&](int64_t r) {
    const T* xr = x + r * n;
    T* pr = p + r * n;
    const T mx = row_max(xr, n);
    T sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      pr[i] = exp_of(xr[i] - mx);
      sum += pr[i];
    }
    T inv = T(1) / sum;
    for (int64_t i = 0; i < n; ++i) pr[i] *= inv;
  });
}

template float cross_entropy_row<float>(const float*, int32_t, int64_t, float*);
template double cross_entropy_row<double>(const double*, int32_t, int64_t, double*);
template void cross_entropy_forward<float>(float*, float*, const float*, const int32_t*, int64_t, int64_t, int64_t);
template void cross_entropy_forward<double>(double*, double*, const double*, const int32_t*, int64_t, int64_t, int64_t);
template void cross_entropy_backward<float>(float*, const float*, const float*, const int32_t*, int64_t, int64_t,
                                            int64_t, float, const float*);
template void cross_entropy_backward<double>(double*, const double*, const double*, const int32_t*, int64_t, int64_t,
                                             int64_t, double, const double*);
template void softmax_rows<float>(float*, const float*, int64_t, int64_t);
template void softmax_rows<double>(double*, const double*, int64_t, int64_t);

}  // namespace zaya
