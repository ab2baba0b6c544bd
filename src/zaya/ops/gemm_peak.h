#pragma once
// The measured f32 GEMM throughput that MFU is reported against (the issue's
// definition: model FLOPs / measured f32 GEMM peak), from a square oneDNN
// sgemm timed on this machine with the current thread count.

#include <cstdint>

namespace zaya {

// Best GFLOP/s of timed n x n x n sgemm calls after one warm-up call: at
// least `reps` of them and at least `min_seconds` of timing, so that a slow
// moment (another process, a clock change) does not set the peak alone.
double measure_f32_gemm_gflops(int64_t n = 1024, int reps = 5, double min_seconds = 0.25);
// The same for bf16 operands with float32 results (ops/matmul_bf16.h), the
// peak that mixed-precision training's MFU is reported against.
double measure_bf16_gemm_gflops(int64_t n = 1024, int reps = 5, double min_seconds = 0.25);

}  // namespace zaya
