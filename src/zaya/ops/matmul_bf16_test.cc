#include "zaya/ops/matmul_bf16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "zaya/core/bf16.h"
#include "zaya/core/rng.h"

namespace zaya {

// `auto` takes bf16 GEMMs only where they were measured faster than float32
// (docs/performance.md, "GEMM peak"): AMX anywhere, AVX512-BF16 on AMD only.
TEST(Bf16GemmRule, AutoPicksBf16OnlyWhereItOutrunsFloat32) {
  EXPECT_TRUE(bf16_gemm_outruns_f32(Bf16Isa::kAmx, false));
  EXPECT_TRUE(bf16_gemm_outruns_f32(Bf16Isa::kAmx, true));
  EXPECT_TRUE(bf16_gemm_outruns_f32(Bf16Isa::kAvx512Bf16, true));
  EXPECT_FALSE(bf16_gemm_outruns_f32(Bf16Isa::kAvx512Bf16, false));  // Intel without AMX: 0.5x
  EXPECT_FALSE(bf16_gemm_outruns_f32(Bf16Isa::kNone, false));
  EXPECT_FALSE(bf16_gemm_outruns_f32(Bf16Isa::kNone, true));
  // This CPU's answer never claims bf16 where oneDNN has no native bf16 GEMM.
  if (!bf16_gemm_is_native()) {
    EXPECT_FALSE(bf16_gemm_outruns_f32());
  }
}

namespace bf16_gemm_test {

// C = op(A) op(B) in double from the bf16 operands, [M, N] row-major.
std::vector<double> reference(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const std::vector<uint16_t>& A,
                              int64_t lda, const std::vector<uint16_t>& B, int64_t ldb) {
  std::vector<double> C(size_t(M * N), 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      for (int64_t k = 0; k < K; ++k)
        C[size_t(i * N + j)] += double(bf16_to_float(A[size_t(ta ? k * lda + i : i * lda + k)])) *
                                double(bf16_to_float(B[size_t(tb ? j * ldb + k : k * ldb + j)]));
  return C;
}

std::vector<uint16_t> random_bf16(size_t n, uint64_t seed) {
  std::vector<uint16_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float_to_bf16(normal01(seed, 0, i));
  return v;
}

// Both the CPU's own bf16 GEMM and the widened float32 fallback (what an
// AVX2-only CPU runs) compute the product of the bf16 operands in float32:
// every layout, padded leading dimensions, and accumulation into C.
TEST(Bf16Gemm, NativeAndWidenedFallbackBothGiveTheBf16Product) {
  const int64_t M = 37, N = 45, K = 70;
  Bf16GemmCache cache;
  for (int widened = 0; widened < 2; ++widened) {
    cache.force_widened(widened == 1);
    for (int layout = 0; layout < 4; ++layout) {
      const bool ta = layout & 1, tb = layout & 2;
      const int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 2;
      const std::vector<uint16_t> A = random_bf16(size_t((ta ? K : M) * lda), 1 + layout);
      const std::vector<uint16_t> B = random_bf16(size_t((tb ? N : K) * ldb), 11 + layout);
      const std::vector<double> ref = reference(ta, tb, M, N, K, A, lda, B, ldb);
      for (int accumulate = 0; accumulate < 2; ++accumulate) {
        std::vector<float> C(size_t(M * ldc), 0.5f);
        gemm_bf16(cache, ta, tb, M, N, K, A.data(), lda, B.data(), ldb, C.data(), ldc, accumulate == 1);
        for (int64_t i = 0; i < M; ++i) {
          for (int64_t j = 0; j < N; ++j)
            ASSERT_NEAR(C[size_t(i * ldc + j)], ref[size_t(i * N + j)] + (accumulate ? 0.5 : 0.0), 1e-4)
                << "widened " << widened << " layout " << layout << " accumulate " << accumulate;
          for (int64_t j = N; j < ldc; ++j) ASSERT_EQ(C[size_t(i * ldc + j)], 0.5f) << "wrote past column N";
        }
      }
    }
    // Batched, B broadcast over the batch (stride 0), as grouped KV heads use it.
    const int64_t batch = 3, R = 9, Kb = 20, Nb = 11;
    const std::vector<uint16_t> A = random_bf16(size_t(batch * R * Kb), 21), B = random_bf16(size_t(Kb * Nb), 22);
    std::vector<float> C(size_t(batch * R * Nb));
    matmul_bf16_batched(cache, {{1, 1, batch, R, Kb}, {0, 0, R * Kb, Kb, 1}}, A.data(),
                        {{1, 1, 1, Kb, Nb}, {0, 0, 0, Nb, 1}}, B.data(), {{1, 1, batch, R, Nb}, {0, 0, R * Nb, Nb, 1}},
                        C.data());
    for (int64_t b = 0; b < batch; ++b) {
      const std::vector<uint16_t> Ab(A.begin() + b * R * Kb, A.begin() + (b + 1) * R * Kb);
      const std::vector<double> ref = reference(false, false, R, Nb, Kb, Ab, Kb, B, Nb);
      for (int64_t i = 0; i < R * Nb; ++i) ASSERT_NEAR(C[size_t(b * R * Nb + i)], ref[size_t(i)], 1e-4) << b;
    }
  }
  cache.force_widened(false);
}

// A B operand over the fallback's 64 MB of widened scratch (2^24 floats) is
// split into blocks of N (B transposed) or of K: the same product.
TEST(Bf16Gemm, WidenedFallbackSplitsABigOperand) {
  Bf16GemmCache cache;
  cache.force_widened(true);
  const int64_t M = 3, N = 4099, K = 4111;  // N * K > 2^24
  const std::vector<uint16_t> A = random_bf16(size_t(M * K), 31), B = random_bf16(size_t(N * K), 32);
  for (int trans_b = 0; trans_b < 2; ++trans_b) {
    const int64_t ldb = trans_b ? K : N;
    const std::vector<double> ref = reference(false, trans_b == 1, M, N, K, A, K, B, ldb);
    for (int accumulate = 0; accumulate < 2; ++accumulate) {
      std::vector<float> C(size_t(M * N), 1.0f);
      gemm_bf16(cache, false, trans_b == 1, M, N, K, A.data(), K, B.data(), ldb, C.data(), N, accumulate == 1);
      for (int64_t i = 0; i < M * N; ++i)
        ASSERT_NEAR(C[size_t(i)], ref[size_t(i)] + accumulate, 1e-3) << trans_b << " " << accumulate << " " << i;
    }
  }
  cache.force_widened(false);
}

}  // namespace bf16_gemm_test
}  // namespace zaya
