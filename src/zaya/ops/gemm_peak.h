#pragma once
// The measured f32 GEMM throughput that MFU is reported against (the issue's
// definition: model FLOPs / measured f32 GEMM peak), from a square oneDNN
// sgemm timed on this machine with the current thread count.

#include <cstdint>

namespace zaya {

// Best GFLOP/s of `reps` timed n x n x n sgemm calls after one warm-up call.
double measure_f32_gemm_gflops(int64_t n = 1024, int reps = 5);
// The same for bf16 operands with float32 results (ops/matmul_bf16.h), the
// peak that mixed-precision training's MFU is reported against.
double measure_bf16_gemm_gflops(int64_t n = 1024, int reps = 5);

}  // namespace zaya
