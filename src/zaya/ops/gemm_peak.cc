#include "zaya/ops/gemm_peak.h"

#include <algorithm>

#include "zaya/core/arena.h"
#include "zaya/core/rng.h"
#include "zaya/core/timer.h"
#include "zaya/ops/matmul.h"
#include "zaya/ops/matmul_bf16.h"

namespace zaya {

double measure_f32_gemm_gflops(int64_t n, int reps, double min_seconds) {
  auto a = aligned_alloc_array<float>(n * n), b = aligned_alloc_array<float>(n * n),
       c = aligned_alloc_array<float>(n * n);
  fill_normal(a.get(), n * n, 0.0f, 1.0f, 1, 1);
  fill_normal(b.get(), n * n, 0.0f, 1.0f, 1, 2);
  gemm<float>(false, false, n, n, n, 1.0f, a.get(), n, b.get(), n, 0.0f, c.get(), n);  // warm-up, page faults
  double best = 0;
  const double start = now_seconds();
  for (int r = 0; r < reps || now_seconds() - start < min_seconds; ++r) {
    const double t0 = now_seconds();
    gemm<float>(false, false, n, n, n, 1.0f, a.get(), n, b.get(), n, 0.0f, c.get(), n);
    const double dt = now_seconds() - t0;
    best = std::max(best, 2.0 * double(n) * double(n) * double(n) / dt / 1e9);
  }
  return best;
}

double measure_bf16_gemm_gflops(int64_t n, int reps, double min_seconds) {
  auto x = aligned_alloc_array<float>(n * n);
  auto a = aligned_alloc_array<uint16_t>(n * n), b = aligned_alloc_array<uint16_t>(n * n);
  auto c = aligned_alloc_array<float>(n * n);
  fill_normal(x.get(), n * n, 0.0f, 1.0f, 1, 1);
  convert_to_bf16(a.get(), x.get(), n * n);
  fill_normal(x.get(), n * n, 0.0f, 1.0f, 1, 2);
  convert_to_bf16(b.get(), x.get(), n * n);
  Bf16GemmCache gemms;
  gemm_bf16(gemms, false, false, n, n, n, a.get(), n, b.get(), n, c.get(), n);  // warm-up: the primitive, page faults
  double best = 0;
  const double start = now_seconds();
  for (int r = 0; r < reps || now_seconds() - start < min_seconds; ++r) {
    const double t0 = now_seconds();
    gemm_bf16(gemms, false, false, n, n, n, a.get(), n, b.get(), n, c.get(), n);
    const double dt = now_seconds() - t0;
    best = std::max(best, 2.0 * double(n) * double(n) * double(n) / dt / 1e9);
  }
  return best;
}

}  // namespace zaya
