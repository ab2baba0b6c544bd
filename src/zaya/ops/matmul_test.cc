#include "zaya/ops/matmul.h"

#include <gtest/gtest.h>

#include <vector>

#include "zaya/ops/grad_check.h"

namespace zaya {
namespace {

using testing::random_vector;
using testing::to_float;

// The oneDNN path must agree with the loop-nest reference for every transpose
// combination, strided operands and beta != 0.
TEST(Matmul, OneDnnMatchesReference) {
  const int64_t M = 37, N = 29, K = 53, pad = 3;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      int64_t lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
      auto A = to_float(random_vector((ta ? K : M) * lda, 1));
      auto B = to_float(random_vector((tb ? N : K) * ldb, 2));
      auto C0 = to_float(random_vector(M * ldc, 3));
      auto C1 = C0;
      gemm<float>(ta, tb, M, N, K, 0.5f, A.data(), lda, B.data(), ldb, 0.75f, C0.data(), ldc);
      gemm_reference<float>(ta, tb, M, N, K, 0.5f, A.data(), lda, B.data(), ldb, 0.75f, C1.data(), ldc);
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j)
          ASSERT_NEAR(C0[i * ldc + j], C1[i * ldc + j], 1e-4) << "ta=" << ta << " tb=" << tb;
    }
}

TEST(Matmul, LinearGradient) {
  const int64_t T = 5, I = 7, O = 4;
  auto x = random_vector(T * I, 1), w = random_vector(O * I, 2), probe = random_vector(T * O, 3);
  auto loss = [&] {
    std::vector<double> y(T * O);
    linear_forward<double>(y.data(), x.data(), w.data(), T, I, O);
    return testing::dot(y, probe);
  };
  std::vector<double> dx(T * I, 0.0), dw(O * I, 0.0);
  linear_backward<double>(dx.data(), dw.data(), probe.data(), x.data(), w.data(), T, I, O);
  testing::expect_gradient("linear x", x, dx, loss);
  testing::expect_gradient("linear w", w, dw, loss);
}

}  // namespace
}  // namespace zaya
