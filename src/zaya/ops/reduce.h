#pragma once
// Column reductions over the token axis, used for the gradients of per-channel
// parameters (norm weights, biases, scales). Each column is summed over tokens
// in order t = 0..T-1 whatever the thread count, so results are bit-reproducible.
// A null out_D is a frozen parameter (model/weights.h): nothing is computed.

#include <cstdint>

namespace zaya {

// out_D[i] += sum_t x_TD[t, i]
template <typename T>
void column_sum(T* out_D, const T* x_TD, int64_t tokens, int64_t dim);

// out_D[i] += sum_t a_TD[t, i] * b_TD[t, i] * (scale_T ? scale_T[t] : 1)
template <typename T>
void column_sum_product(T* out_D, const T* a_TD, const T* b_TD, const T* scale_T, int64_t tokens, int64_t dim);

}  // namespace zaya
