#include "zaya/ops/adapted_linear.h"

#include <gtest/gtest.h>

#include <vector>

#include "zaya/core/rng.h"
#include "zaya/ops/grad_check.h"
#include "zaya/ops/matmul.h"

namespace zaya {
namespace {

using testing::dot;
using testing::random_vector;
using Vec = std::vector<double>;

constexpr int64_t kTokens = 5, kIn = 6, kOut = 4, kRank = 3;

LoraShape shape(double dropout, int64_t out_stride) {
  LoraShape s;
  s.tokens = kTokens;
  s.in = kIn;
  s.out = kOut;
  s.rank = kRank;
  s.out_stride = out_stride;
  s.scale = 8.0 / 3.0;
  s.dropout = dropout;
  s.seed = 5;
  s.stream = 17;
  return s;
}

// drop(x): inverted dropout under ops/lora_linear.h's mask (Philox value of
// the element's position >= p keeps it).
Vec dropped(const Vec& x, const LoraShape& s) {
  Vec xd(x.size());
  for (size_t at = 0; at < x.size(); ++at)
    xd[at] = uniform01(s.seed, s.stream, uint64_t(at)) >= float(s.dropout) ? x[at] / (1 - s.dropout) : 0.0;
  return xd;
}

// The adapted layer from its formula, as plain loops: y[t, offset + o] is
// sum_i W[o, i] x[t, i] (w given; else y's value stays) plus
// scale * sum_k sum_i B[o, k] A[k, i] drop(x)[t, i].
Vec reference(Vec y, const Vec& x, const Vec* w, const Vec& a, const Vec& b, const LoraShape& s, int64_t offset) {
  const Vec xd = dropped(x, s);
  for (int64_t t = 0; t < s.tokens; ++t) {
    for (int64_t o = 0; o < s.out; ++o) {
      double& out = y[t * s.out_stride + offset + o];
      if (w != nullptr) {
        out = 0;
        for (int64_t i = 0; i < s.in; ++i) out += (*w)[o * s.in + i] * x[t * s.in + i];
      }
      double branch = 0;
      for (int64_t k = 0; k < s.rank; ++k)
        for (int64_t i = 0; i < s.in; ++i) branch += b[o * s.rank + k] * a[k * s.in + i] * xd[t * s.in + i];
      out += s.scale * branch;
    }
  }
  return y;
}

struct Fixture {
  Vec x = random_vector(kTokens * kIn, 1), w = random_vector(kOut * kIn, 2), a = random_vector(kRank * kIn, 3),
      b = random_vector(kOut * kRank, 4);
  Vec da = Vec(a.size(), 0.0), db = Vec(b.size(), 0.0), h = Vec(kTokens * kRank);
  Vec scratch;
  LoraBranch<double> branch(const LoraShape& s, int64_t offset) {
    scratch.assign(size_t(lora_backward_scratch_floats(s)) + 1, 0.0);
    LoraBranch<double> l;
    l.a_rI = a.data();
    l.b_Or = b.data();
    l.da_rI = da.data();
    l.db_Or = db.data();
    l.h_Tr = h.data();
    l.scratch = scratch.data();
    l.shape = s;
    l.row_offset = offset;
    return l;
  }
};

// The dense helper (base product, then branch) against the formula, and its
// backward (dx, dW, dA, dB) against central differences.
void check_dense(double dropout) {
  Fixture f;
  const LoraShape s = shape(dropout, kOut);
  const LoraBranch<double> l = f.branch(s, 0);
  const Vec probe = random_vector(kTokens * kOut, 5);
  auto run = [&] {
    Vec y(kTokens * kOut, 123.0);  // overwritten, not added to
    adapted_linear_forward<double>(Precision{}, y.data(), f.x.data(), f.w.data(), kTokens, kIn, kOut, l);
    return y;
  };
  const Vec y = run(), want = reference(Vec(kTokens * kOut, 0.0), f.x, &f.w, f.a, f.b, s, 0);
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], want[i], 1e-12) << i;
  auto loss = [&] { return dot(run(), probe); };
  run();
  Vec dx(f.x.size(), 0.0), dw(f.w.size(), 0.0);
  adapted_linear_backward<double>(Precision{}, dx.data(), dw.data(), probe.data(), f.x.data(), f.w.data(), kTokens, kIn,
                                  kOut, l);
  testing::expect_gradient("adapted x", f.x, dx, loss);
  testing::expect_gradient("adapted W", f.w, dw, loss);
  testing::expect_gradient("adapted A", f.a, f.da, loss);
  testing::expect_gradient("adapted B", f.b, f.db, loss);
}

TEST(AdaptedLinear, DenseMatchesReferenceAndFiniteDifferences) { check_dense(0.0); }

TEST(AdaptedLinear, DenseWithDropoutMatchesReferenceAndFiniteDifferences) { check_dense(0.3); }

// The branch alone into columns [2, 2 + out) of a wider output (a fused
// product's slice, or one expert's rows): the rest of y is left as it was.
TEST(AdaptedLinear, BranchAddsIntoItsColumnsOfAFusedOutput) {
  Fixture f;
  const int64_t offset = 2, stride = kOut + 3;
  const LoraShape s = shape(0.2, stride);
  const LoraBranch<double> l = f.branch(s, offset);
  const Vec y0 = random_vector(kTokens * stride, 6), probe = random_vector(kTokens * stride, 7);
  auto run = [&] {
    Vec y = y0;
    lora_branch_forward<double>(y.data(), f.x.data(), l);
    return y;
  };
  const Vec y = run(), want = reference(y0, f.x, nullptr, f.a, f.b, s, offset);
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], want[i], 1e-12) << i;
  for (int64_t t = 0; t < kTokens; ++t)
    for (int64_t j = 0; j < stride; ++j)
      if (j < offset || j >= offset + kOut) {
        EXPECT_EQ(y[t * stride + j], y0[t * stride + j]) << t << "," << j;
      }
  auto loss = [&] { return dot(run(), probe); };
  run();
  Vec dx(f.x.size(), 0.0);
  lora_branch_backward<double>(dx.data(), probe.data(), f.x.data(), l);
  testing::expect_gradient("branch x", f.x, dx, loss);
  testing::expect_gradient("branch A", f.a, f.da, loss);
  testing::expect_gradient("branch B", f.b, f.db, loss);
}

// Without an adapter the helper is the base layer, bit for bit (a full
// training run takes this path through every adaptable matrix).
TEST(AdaptedLinear, WithoutAnAdapterIsTheBaseLinearBitForBit) {
  auto f32 = [](const Vec& v) { return testing::to_float(v); };
  const std::vector<float> x = f32(random_vector(kTokens * kIn, 1)), w = f32(random_vector(kOut * kIn, 2)),
                           dy = f32(random_vector(kTokens * kOut, 3));
  const LoraBranch<float> none;
  std::vector<float> y(kTokens * kOut), want(y.size());
  adapted_linear_forward<float>(Precision{}, y.data(), x.data(), w.data(), kTokens, kIn, kOut, none);
  linear_forward<float>(want.data(), x.data(), w.data(), kTokens, kIn, kOut);
  EXPECT_EQ(y, want);
  std::vector<float> dx(x.size(), 0.5f), dw(w.size(), 0.25f), dx_want = dx, dw_want = dw;
  adapted_linear_backward<float>(Precision{}, dx.data(), dw.data(), dy.data(), x.data(), w.data(), kTokens, kIn, kOut,
                                 none);
  linear_backward<float>(dx_want.data(), dw_want.data(), dy.data(), x.data(), w.data(), kTokens, kIn, kOut);
  EXPECT_EQ(dx, dx_want);
  EXPECT_EQ(dw, dw_want);
  std::vector<float> y_before = y;
  lora_branch_forward<float>(y.data(), x.data(), none);
  EXPECT_EQ(y, y_before);
}

}  // namespace
}  // namespace zaya
