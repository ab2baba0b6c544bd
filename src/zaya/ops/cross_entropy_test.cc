// The float instantiation of the cross-entropy (exp_f32 inside) against the
// float64 one, and its bf16-output backward against the float one rounded.
// The float64 gradients are finite-difference checked in elementwise_test.cc.
#include "zaya/ops/cross_entropy.h"

#include "zaya/core/exp_f32.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>
#include <cstring>
#include <vector>

#include "zaya/core/bf16.h"
#include "zaya/ops/grad_check.h"

namespace zaya {
namespace {

using testing::random_vector;

struct Problem {
  int64_t T = 6, V = 40, real_V = 37;  // three padding columns
  std::vector<double> z;
  std::vector<int32_t> targets;
  Problem() {
    z = random_vector(T * V, 5);
    for (double& v : z) v *= 8.0;     // logits over a wide range, as a trained head gives
    targets = {3, 36, -1, 0, 17, 9};  // one position without a target
  }
  std::vector<float> zf() const { return std::vector<float>(z.begin(), z.end()); }
};

TEST(CrossEntropy, FloatAgreesWithFloat64) {
  const Problem p;
  const std::vector<float> zf = p.zf();
  std::vector<float> loss(p.T), lse(p.T), dz(p.T * p.V);
  std::vector<double> loss64(p.T), lse64(p.T), dz64(p.T * p.V);
  // The float64 reference sees the same (float) logits.
  const std::vector<double> z64(zf.begin(), zf.end());
  cross_entropy_forward<float>(loss.data(), lse.data(), zf.data(), p.targets.data(), p.T, p.V, p.real_V);
  cross_entropy_forward<double>(loss64.data(), lse64.data(), z64.data(), p.targets.data(), p.T, p.V, p.real_V);
  for (int64_t t = 0; t < p.T; ++t) {
    EXPECT_NEAR(lse[t], lse64[t], 2e-6 * std::fabs(lse64[t]) + 1e-6) << t;
    EXPECT_NEAR(loss[t], loss64[t], 2e-6 * std::fabs(lse64[t]) + 1e-6) << t;
  }
  cross_entropy_backward<float>(dz.data(), zf.data(), lse.data(), p.targets.data(), p.T, p.V, p.real_V, 0.25f);
  cross_entropy_backward<double>(dz64.data(), z64.data(), lse64.data(), p.targets.data(), p.T, p.V, p.real_V, 0.25);
  for (int64_t i = 0; i < p.T * p.V; ++i) EXPECT_NEAR(dz[i], dz64[i], 1e-6) << i;
  EXPECT_EQ(dz[2 * p.V + 5], 0.0f);   // no target: no gradient
  EXPECT_EQ(dz[0 * p.V + 38], 0.0f);  // padding column
  EXPECT_LT(dz[0 * p.V + 3], 0.0f);   // the target's softmax - 1
}

TEST(CrossEntropy, Bf16BackwardIsTheFloatBackwardRounded) {
  const Problem p;
  const std::vector<float> zf = p.zf();
  std::vector<float> loss(p.T), lse(p.T), dz(p.T * p.V);
  cross_entropy_forward<float>(loss.data(), lse.data(), zf.data(), p.targets.data(), p.T, p.V, p.real_V);
  cross_entropy_backward<float>(dz.data(), zf.data(), lse.data(), p.targets.data(), p.T, p.V, p.real_V, 0.25f);
  std::vector<uint16_t> db(p.T * p.V, 0xffff);  // stale contents are overwritten, padding included
  cross_entropy_backward_bf16(db.data(), zf.data(), lse.data(), p.targets.data(), p.T, p.V, p.real_V, 0.25f);
  for (int64_t i = 0; i < p.T * p.V; ++i) ASSERT_EQ(db[i], float_to_bf16(dz[i])) << i;
}

TEST(CrossEntropy, RowIsTheForwardsRowBitForBit) {
  const int64_t T = 5, V = 1031, real = 1000;  // padding columns beyond `real` are left out of both
  std::vector<float> z(size_t(T * V));
  for (size_t i = 0; i < z.size(); ++i) z[i] = float(std::sin(double(i) * 0.61) * 9.0);
  const std::vector<int32_t> targets = {0, 999, -1, 17, 512};
  std::vector<float> loss(T), lse(T);
  cross_entropy_forward<float>(loss.data(), lse.data(), z.data(), targets.data(), T, V, real);
  for (int64_t t = 0; t < T; ++t) {
    float row_lse = 0;
    const float row = cross_entropy_row<float>(z.data() + t * V, targets[size_t(t)], real, &row_lse);
    EXPECT_EQ(std::memcmp(&row, &loss[size_t(t)], sizeof(float)), 0) << t;
    EXPECT_EQ(std::memcmp(&row_lse, &lse[size_t(t)], sizeof(float)), 0) << t;
  }
}

// The sampler's stored-terms instantiation of the row's sum (exp_shifted_sum<float, true>) gives the sum
// cross_entropy_row's log-sum-exp is made of, bit for bit, and terms exp_f32(z - max), at every length (vector
// bodies and tails) and range of logits.
TEST(CrossEntropy, StoredTermsSumAsTheRow) {
  uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return double(state >> 11) * 0x1.0p-53;
  };
  for (int64_t n : {1, 7, 15, 16, 17, 63, 64, 65, 100, 1000, 1024, 1031, 3000, 4099}) {
    for (double spread : {0.5, 8.0, 40.0, 200.0}) {
      std::vector<float> z(static_cast<size_t>(n)), terms(static_cast<size_t>(n), -1.0f);
      for (float& x : z) x = float((next() - 0.5) * spread);
      const float mx = *std::max_element(z.begin(), z.end());
      const float stored = exp_shifted_sum<float, true>(z.data(), mx, n, terms.data());
      float row_lse = 0;
      cross_entropy_row<float>(z.data(), 0, n, &row_lse);
      const float lse = log_sum_exp_of(mx, stored);
      EXPECT_EQ(std::memcmp(&lse, &row_lse, sizeof(float)), 0) << "n " << n << ", spread " << spread;
      EXPECT_EQ(stored, (exp_shifted_sum<float, false>(z.data(), mx, n, nullptr))) << "n " << n;
      for (int64_t v = 0; v < n; ++v) ASSERT_EQ(terms[size_t(v)], exp_f32(z[size_t(v)] - mx)) << v;
    }
  }
}

}  // namespace
}  // namespace zaya
