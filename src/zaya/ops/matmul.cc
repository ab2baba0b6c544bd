#include "zaya/ops/matmul.h"

#include <oneapi/dnnl/dnnl.h>

#include <type_traits>

#include "zaya/core/error.h"
#include "zaya/core/library_call.h"
#include "zaya/ops/bf16_linear.h"
#include "zaya/ops/parallel_for.h"
#include "zaya/ops/quant_linear.h"

namespace zaya {

template <typename T>
void gemm_reference(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
                    const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  parallel_for(M, M * N * K, [&](int64_t i) {
    for (int64_t j = 0; j < N; ++j) {
      T acc = 0;
      for (int64_t k = 0; k < K; ++k) {
        T a = trans_a ? A[k * lda + i] : A[i * lda + k];
        T b = trans_b ? B[j * ldb + k] : B[k * ldb + j];
        acc += a * b;
      }
      T prev = beta == T(0) ? T(0) : beta * C[i * ldc + j];
      C[i * ldc + j] = alpha * acc + prev;
    }
  });
}

template <>
void gemm<float>(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                 const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) {  // oneDNN rejects K = 0; the product is empty.
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
    return;
  }
  LibraryCall library_call;
  dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  ZAYA_CHECK(st == dnnl_success, "oneDNN sgemm failed (status {}) for M={} N={} K={}", int(st), M, N, K);
}

template <>
void gemm<double>(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
                  int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  gemm_reference<double>(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

template <typename T>
void linear_forward(T* y_TO, const T* x_TI, const T* w_OI, int64_t tokens, int64_t in, int64_t out, bool accumulate) {
  gemm<T>(false, true, tokens, out, in, T(1), x_TI, in, w_OI, in, accumulate ? T(1) : T(0), y_TO, out);
}

template <typename T>
void linear_backward(T* dx_TI, T* dw_OI, const T* dy_TO, const T* x_TI, const T* w_OI, int64_t tokens, int64_t in,
                     int64_t out) {
  // dx[T,I] += dy[T,O] * w[O,I];  dw[O,I] += dy^T[O,T] * x[T,I]
  if (dx_TI != nullptr) gemm<T>(false, false, tokens, in, out, T(1), dy_TO, out, w_OI, in, T(1), dx_TI, in);
  if (dw_OI != nullptr) gemm<T>(true, false, out, in, tokens, T(1), dy_TO, out, x_TI, in, T(1), dw_OI, in);
}

template <typename T>
void linear_forward(const Precision& precision, T* y_TO, const T* x_TI, const T* w_OI, int64_t tokens, int64_t in,
                    int64_t out, bool accumulate) {
  if constexpr (std::is_same_v<T, float>) {
    if (const uint8_t* wq = precision.quant != nullptr ? precision.quant->rows_of(w_OI, in) : nullptr) {
      quant_linear_forward(*precision.quant, precision.quant->weights()->type, y_TO, x_TI, wq, tokens, in, out,
                           accumulate);
      return;
    }
    if (const uint16_t* wb = precision.bf16_gemms() ? precision.bf16->copy_of(w_OI) : nullptr) {
      linear_forward_bf16(*precision.bf16, y_TO, x_TI, wb, tokens, in, out, accumulate);
      return;
    }
  } else {
    ZAYA_ASSERT(!precision.bf16_gemms() && precision.quant == nullptr);
  }
  linear_forward<T>(y_TO, x_TI, w_OI, tokens, in, out, accumulate);
}

template <typename T>
void linear_backward(const Precision& precision, T* dx_TI, T* dw_OI, const T* dy_TO, const T* x_TI, const T* w_OI,
                     int64_t tokens, int64_t in, int64_t out) {
  if constexpr (std::is_same_v<T, float>) {
    if (const uint8_t* wq = precision.quant != nullptr ? precision.quant->rows_of(w_OI, in) : nullptr) {
      ZAYA_CHECK(dw_OI == nullptr, "internal error: a weight gradient asked of a frozen quantized matrix");
      quant_linear_backward(*precision.quant, precision.quant->weights()->type, dx_TI, dy_TO, wq, tokens, in, out);
      return;
    }
    if (const uint16_t* wb = precision.bf16_gemms() ? precision.bf16->copy_of(w_OI) : nullptr) {
      linear_backward_bf16(*precision.bf16, dx_TI, dw_OI, dy_TO, x_TI, wb, tokens, in, out);
      return;
    }
  } else {
    ZAYA_ASSERT(!precision.bf16_gemms() && precision.quant == nullptr);
  }
  linear_backward<T>(dx_TI, dw_OI, dy_TO, x_TI, w_OI, tokens, in, out);
}

template void gemm_reference<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
                                    int64_t, float, float*, int64_t);
template void gemm_reference<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t,
                                     const double*, int64_t, double, double*, int64_t);
template void linear_forward<float>(float*, const float*, const float*, int64_t, int64_t, int64_t, bool);
template void linear_forward<double>(double*, const double*, const double*, int64_t, int64_t, int64_t, bool);
template void linear_backward<float>(float*, float*, const float*, const float*, const float*, int64_t, int64_t,
                                     int64_t);
template void linear_backward<double>(double*, double*, const double*, const double*, const double*, int64_t, int64_t,
                                      int64_t);
template void linear_forward<float>(const Precision&, float*, const float*, const float*, int64_t, int64_t, int64_t,
                                    bool);
template void linear_forward<double>(const Precision&, double*, const double*, const double*, int64_t, int64_t, int64_t,
                                     bool);
template void linear_backward<float>(const Precision&, float*, float*, const float*, const float*, const float*,
                                     int64_t, int64_t, int64_t);
template void linear_backward<double>(const Precision&, double*, double*, const double*, const double*, const double*,
                                      int64_t, int64_t, int64_t);

}  // namespace zaya
