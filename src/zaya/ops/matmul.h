#pragma once
// Matrix multiplication, the only place GEMMs are issued (docs/developer-guide.md: keep
// the BLAS choice behind ops/matmul). Row-major throughout.
//
// float goes to oneDNN's dnnl_sgemm (measured fastest on this CPU, docs/performance.md);
// double runs a straightforward loop nest and serves the finite-difference
// gradient tests. Called inside an OpenMP parallel region, oneDNN runs on the
// calling thread only, so many small GEMMs can be spread over threads.

#include <cstdint>

namespace zaya {

struct Precision;  // ops/precision.h

// C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C, op = transpose if the flag is set.
// lda/ldb/ldc are row strides of the stored (untransposed) matrices.
template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
          int64_t ldb, T beta, T* C, int64_t ldc);
// The two types there are (matmul.cc), declared where every caller sees them,
// as the language requires of explicit specializations.
template <>
void gemm<float>(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                 const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
template <>
void gemm<double>(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
                  int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc);

// The loop-nest reference for gemm (used by tests to check the fast path).
template <typename T>
void gemm_reference(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
                    const T* B, int64_t ldb, T beta, T* C, int64_t ldc);

// Linear layer as nn.Linear: y_TO (+)= x_TI * w_OI^T in T. `accumulate` adds into y.
template <typename T>
void linear_forward(T* y_TO, const T* x_TI, const T* w_OI, int64_t tokens, int64_t in, int64_t out,
                    bool accumulate = false);

// Backward of linear_forward; adds into dx_TI (if not null) and dw_OI (if not null).
template <typename T>
void linear_backward(T* dx_TI, T* dw_OI, const T* dy_TO, const T* x_TI, const T* w_OI, int64_t tokens, int64_t in,
                     int64_t out);

// The same in a given precision (ops/precision.h): in float with bf16 GEMMs,
// a weight inside the context's arena runs with bf16 operands
// (ops/bf16_linear.h, mixed-precision training); any other weight, and
// double, in T. Double takes only the float32 precision.
template <typename T>
void linear_forward(const Precision& precision, T* y_TO, const T* x_TI, const T* w_OI, int64_t tokens, int64_t in,
                    int64_t out, bool accumulate = false);
template <typename T>
void linear_backward(const Precision& precision, T* dx_TI, T* dw_OI, const T* dy_TO, const T* x_TI, const T* w_OI,
                     int64_t tokens, int64_t in, int64_t out);

}  // namespace zaya
