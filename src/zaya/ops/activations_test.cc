// SwiGLU's float instantiation (exp_f32 inside) against float64. The float64
// gradients are finite-difference checked in elementwise_test.cc.
#include "zaya/ops/activations.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "zaya/ops/grad_check.h"

namespace zaya {
namespace {

using testing::random_vector;
using testing::to_float;

constexpr int64_t kRows = 7, kFfn = 45;

std::vector<float> gate_and_up() {
  std::vector<float> h = to_float(random_vector(kRows * 2 * kFfn, 21));
  for (float& v : h) v *= 12.0f;  // deep into both tails of the sigmoid
  return h;
}

TEST(SwiGlu, FloatAgreesWithFloat64) {
  const std::vector<float> h = gate_and_up(), dout = to_float(random_vector(kRows * kFfn, 22));
  const std::vector<double> h64(h.begin(), h.end()), dout64(dout.begin(), dout.end());
  std::vector<float> out(kRows * kFfn), dh(kRows * 2 * kFfn, 0.0f);
  std::vector<double> out64(kRows * kFfn), dh64(kRows * 2 * kFfn, 0.0);
  swiglu_forward<float>(out.data(), h.data(), kRows, kFfn);
  swiglu_forward<double>(out64.data(), h64.data(), kRows, kFfn);
  swiglu_backward<float>(dh.data(), dout.data(), h.data(), kRows, kFfn);
  swiglu_backward<double>(dh64.data(), dout64.data(), h64.data(), kRows, kFfn);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], out64[i], 1e-6 * (1 + std::fabs(out64[i]))) << i;
  for (size_t i = 0; i < dh.size(); ++i) EXPECT_NEAR(dh[i], dh64[i], 1e-5 * (1 + std::fabs(dh64[i]))) << i;
}

}  // namespace
}  // namespace zaya
