#include "zaya/ops/reduce.h"

#include "zaya/ops/parallel_for.h"

#include <algorithm>

namespace zaya {
namespace {

// Splits [0, dim) into per-thread column ranges of whole 16-float blocks
// (`work` floats in all, ops/parallel_for.h).
template <typename Body>
void for_column_ranges(int64_t dim, int64_t work, Body body) {
  parallel_region(work, [&](int id, int nt) {
    int64_t blocks = (dim + 15) / 16;
    int64_t b0 = blocks * id / nt, b1 = blocks * (id + 1) / nt;
    int64_t i0 = std::min(dim, b0 * 16), i1 = std::min(dim, b1 * 16);
    if (i0 < i1) body(i0, i1);
  });
}

}  // namespace

template <typename T>
void column_sum(T* out_D, const T* x_TD, int64_t tokens, int64_t dim) {
  if (out_D == nullptr) return;  // a frozen parameter: no gradient
  for_column_ranges(dim, tokens * dim, [&](int64_t i0, int64_t i1) {
    for (int64_t t = 0; t < tokens; ++t) {
      const T* x = x_TD + t * dim;
#pragma omp simd
      for (int64_t i = i0; i < i1; ++i) out_D[i] += x[i];
    }
  });
}

template <typename T>
void column_sum_product(T* out_D, const T* a_TD, const T* b_TD, const T* scale_T, int64_t tokens, int64_t dim) {
  if (out_D == nullptr) return;  // a frozen parameter: no gradient
  for_column_ranges(dim, 2 * tokens * dim, [&](int64_t i0, int64_t i1) {
    for (int64_t t = 0; t < tokens; ++t) {
      const T* a = a_TD + t * dim;
      const T* b = b_TD + t * dim;
      T s = scale_T != nullptr ? scale_T[t] : T(1);
#pragma omp simd
      for (int64_t i = i0; i < i1; ++i) out_D[i] += a[i] * b[i] * s;
    }
  });
}

template void column_sum<float>(float*, const float*, int64_t, int64_t);
template void column_sum<double>(double*, const double*, int64_t, int64_t);
template void column_sum_product<float>(float*, const float*, const float*, const float*, int64_t, int64_t);
template void column_sum_product<double>(double*, const double*, const double*, const double*, int64_t, int64_t);

}  // namespace zaya
