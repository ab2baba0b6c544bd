// The float instantiation of the cross-entropy (exp_f32 inside) against the
// float64 one, and its bf16-output backward against the float one rounded.
// The float64 gradients are finite-difference checked in elementwise_test.cc.
#include "zaya/ops/cross_entropy.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace zaya
