// Finite-difference tests of the small ops: rmsnorm, residual scaling,
// activations, QK norm, RoPE, cross-entropy and routing losses.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "zaya/ops/activations.h"
#include "zaya/ops/cross_entropy.h"
#include "zaya/ops/grad_check.h"
#include "zaya/ops/qk_norm.h"
#include "zaya/ops/residual_scale.h"
#include "zaya/ops/rmsnorm.h"
#include "zaya/ops/rope.h"
#include "zaya/ops/routing.h"

namespace zaya {
namespace {

using testing::dot;
using testing::expect_gradient;
using testing::random_vector;
using Vec = std::vector<double>;

TEST(RmsNorm, Gradient) {
  const int64_t T = 4, D = 9;
  Vec x = random_vector(T * D, 1), w = random_vector(D, 2, 0.3, 1.0), probe = random_vector(T * D, 3);
  Vec rstd(T);
  auto loss = [&] {
    Vec y(T * D);
    rmsnorm_forward<double>(y.data(), rstd.data(), x.data(), w.data(), T, D, 1e-5);
    return dot(y, probe);
  };
  loss();
  Vec dx(T * D, 0.0), dw(D, 0.0);
  rmsnorm_backward<double>(dx.data(), dw.data(), probe.data(), x.data(), w.data(), rstd.data(), T, D);
  expect_gradient("rmsnorm x", x, dx, loss);
  expect_gradient("rmsnorm w", w, dw, loss);
}

TEST(RmsNorm, MatchesFormula) {
  const int64_t D = 4;
  std::vector<float> x = {1, -2, 3, -4}, w = {1, 1, 2, 0.5f}, y(D), rstd(1);
  rmsnorm_forward<float>(y.data(), rstd.data(), x.data(), w.data(), 1, D, 1e-5f);
  float r = 1.0f / std::sqrt((1 + 4 + 9 + 16) / 4.0f + 1e-5f);
  for (int i = 0; i < D; ++i) EXPECT_FLOAT_EQ(y[i], x[i] * r * w[i]);
}

TEST(ResidualScale, GradientWithAndWithoutResidual) {
  const int64_t T = 3, D = 5;
  for (bool with_res : {true, false}) {
    Vec h = random_vector(T * D, 1), r = random_vector(T * D, 2);
    Vec hs = random_vector(D, 3, 0.2, 1), hb = random_vector(D, 4, 0.1), rs = random_vector(D, 5, 0.2, 1),
        rb = random_vector(D, 6, 0.1), probe = random_vector(T * D, 7);
    auto loss = [&] {
      Vec out(T * D);
      residual_scale_forward<double>(out.data(), h.data(), hs.data(), hb.data(), with_res ? r.data() : nullptr,
                                     rs.data(), rb.data(), T, D);
      return dot(out, probe);
    };
    // The data gradients start as garbage (they are written); the parameter ones at 0 (added into).
    Vec dh(T * D, 7.0), dr(T * D, -3.0), dhs(D, 0.0), dhb(D, 0.0), drs(D, 0.0), drb(D, 0.0);
    residual_scale_backward<double>(dh.data(), dhs.data(), dhb.data(), dr.data(), drs.data(), drb.data(), probe.data(),
                                    h.data(), hs.data(), hb.data(), with_res ? r.data() : nullptr, rs.data(), rb.data(),
                                    T, D);
    expect_gradient("h", h, dh, loss);
    expect_gradient("hs", hs, dhs, loss);
    expect_gradient("hb", hb, dhb, loss);
    if (with_res) {
      expect_gradient("res", r, dr, loss);
      expect_gradient("rs", rs, drs, loss);
      expect_gradient("rb", rb, drb, loss);
    }
  }
}

// The float kernel walks column chunks token by token (ops/residual_scale.cc):
// each parameter-gradient column must still be the fused multiply-add chain
// over tokens in order, the same bits at any thread count, and the data
// gradients written over whatever the buffers held. 600 columns: more than
// one chunk and not a multiple of the 16-column bands.
TEST(ResidualScale, FloatBackwardSumsEachColumnInTokenOrderAtAnyThreadCount) {
  const int64_t T = 37, D = 600;
  auto floats = [](int64_t n, uint64_t seed, double scale = 1.0, double offset = 0.0) {
    std::vector<float> v(static_cast<size_t>(n));
    const Vec d = random_vector(size_t(n), seed, scale, offset);
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float(d[size_t(i)]);
    return v;
  };
  const std::vector<float> h = floats(T * D, 1), r = floats(T * D, 2), g = floats(T * D, 3);
  const std::vector<float> hs = floats(D, 4, 0.2, 1), hb = floats(D, 5), rs = floats(D, 6, 0.2, 1), rb = floats(D, 7);
  const std::vector<float> start = floats(D, 8);  // parameter gradients already holding a micro-batch's sum
  for (bool with_res : {true, false}) {
    // Reference: one column at a time, tokens in order.
    std::vector<float> dh(T * D), dr(T * D), dhs = start, dhb = start, drs = start, drb = start;
    for (int64_t i = 0; i < D; ++i)
      for (int64_t t = 0; t < T; ++t) {
        const float gi = g[t * D + i];
        dh[t * D + i] = gi * hs[i];
        dhs[i] = std::fma(gi, h[t * D + i] + hb[i], dhs[i]);
        dhb[i] = std::fma(gi, hs[i], dhb[i]);
        if (!with_res) continue;
        dr[t * D + i] = gi * rs[i];
        drs[i] = std::fma(gi, r[t * D + i] + rb[i], drs[i]);
        drb[i] = std::fma(gi, rs[i], drb[i]);
      }
    const int saved = omp_get_max_threads();
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      std::vector<float> odh(T * D, 7.0f), odr(T * D, -3.0f), ohs = start, ohb = start, ors = start, orb = start;
      residual_scale_backward<float>(odh.data(), ohs.data(), ohb.data(), odr.data(), ors.data(), orb.data(), g.data(),
                                     h.data(), hs.data(), hb.data(), with_res ? r.data() : nullptr, rs.data(),
                                     rb.data(), T, D);
      auto same = [&](const char* what, const std::vector<float>& got, const std::vector<float>& want) {
        EXPECT_EQ(std::memcmp(got.data(), want.data(), sizeof(float) * want.size()), 0)
            << what << " with " << threads << " threads, residual " << with_res;
      };
      same("dh", odh, dh);
      same("dhs", ohs, dhs);
      same("dhb", ohb, dhb);
      if (with_res) {
        same("dres", odr, dr);
        same("drs", ors, drs);
        same("drb", orb, drb);
      } else {
        same("dres untouched", odr, std::vector<float>(T * D, -3.0f));
        same("drs untouched", ors, start);
      }
    }
    omp_set_num_threads(saved);
  }
}

TEST(Activations, GeluGradientAndValue) {
  const int64_t n = 11;
  Vec x = random_vector(n, 1, 2.0), probe = random_vector(n, 2);
  auto loss = [&] {
    Vec y(n);
    gelu_forward<double>(y.data(), x.data(), n);
    return dot(y, probe);
  };
  Vec dx(n, 0.0);
  gelu_backward<double>(dx.data(), probe.data(), x.data(), n);
  expect_gradient("gelu", x, dx, loss);
  double one = 1.0, y1 = 0;
  gelu_forward<double>(&y1, &one, 1);
  EXPECT_NEAR(y1, 0.8413447460685429, 1e-12);  // x * Phi(x) at x = 1 (exact erf form)
}

TEST(Activations, SwigluGradient) {
  const int64_t rows = 3, F = 4;
  Vec h = random_vector(rows * 2 * F, 1, 1.5), probe = random_vector(rows * F, 2);
  auto loss = [&] {
    Vec y(rows * F);
    swiglu_forward<double>(y.data(), h.data(), rows, F);
    return dot(y, probe);
  };
  Vec dh(rows * 2 * F, 0.0);
  swiglu_backward<double>(dh.data(), probe.data(), h.data(), rows, F);
  expect_gradient("swiglu", h, dh, loss);
}

TEST(QkNorm, GradientWithTemperature) {
  const int64_t T = 3, H = 2, d = 6;
  Vec x = random_vector(T * H * d, 1), temp = random_vector(H, 2, 0.3, 1.0), probe = random_vector(T * H * d, 3);
  Vec inv(T * H);
  auto loss = [&] {
    Vec y(T * H * d);
    l2norm_heads_forward<double>(y.data(), inv.data(), x.data(), temp.data(), T, H, d);
    return dot(y, probe);
  };
  loss();
  Vec dx(T * H * d, 0.0), dtemp(H, 0.0);
  l2norm_heads_backward<double>(dx.data(), dtemp.data(), probe.data(), x.data(), inv.data(), temp.data(), T, H, d);
  expect_gradient("qknorm x", x, dx, loss);
  expect_gradient("qknorm temp", temp, dtemp, loss);
}

TEST(QkNorm, OutputHasNormSqrtD) {
  const int64_t d = 8;
  std::vector<float> x(d), y(d), inv(1);
  for (int i = 0; i < d; ++i) x[i] = float(i) - 3.5f;
  l2norm_heads_forward<float>(y.data(), inv.data(), x.data(), nullptr, 1, 1, d);
  double ss = 0;
  for (float v : y) ss += double(v) * v;
  EXPECT_NEAR(std::sqrt(ss), std::sqrt(double(d)), 1e-5);
}

TEST(Rope, RotatesOnlyThePartialSliceAndInverts) {
  const int64_t T = 4, H = 2, d = 8, rot = 4;
  RopeTable table;
  table.build(16, rot, 10000.0);
  std::vector<int32_t> pos = {0, 1, 5, 15};
  Vec x = random_vector(T * H * d, 1), y = x;
  rope_apply<double>(y.data(), pos.data(), T, H, d, table, false);
  // position 0: identity; channels >= rot: untouched
  for (int64_t i = 0; i < H * d; ++i) EXPECT_DOUBLE_EQ(y[i], x[i]);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = rot; i < d; ++i) EXPECT_DOUBLE_EQ(y[(t * H + h) * d + i], x[(t * H + h) * d + i]);
  // NeoX pairing (i, i + rot/2) at position 1, frequency index 0 (inv_freq = 1)
  double c = std::cos(1.0), s = std::sin(1.0);
  EXPECT_NEAR(y[H * d + 0], x[H * d + 0] * c - x[H * d + 2] * s, 1e-12);
  EXPECT_NEAR(y[H * d + 2], x[H * d + 2] * c + x[H * d + 0] * s, 1e-12);
  rope_apply<double>(y.data(), pos.data(), T, H, d, table, true);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(y[i], x[i], 1e-12);
}

// spec §11 "RoPE precision": kF32 tables are the reference's float32 formula
// (inv_freq = 1 / theta^(2i/rot), angle = pos * inv_freq, each in float32), and
// they differ from the float64 angles: hardly at short range, by ~1e-3 at 32K.
TEST(Rope, Float32AnglesFollowTheReferenceFormula) {
  const int64_t rot = 64, half = rot / 2, P = 40000;
  const double theta = 1e6;
  RopeTable f32, f64;
  f32.build(P, rot, theta, RopePrecision::kF32);
  f64.build(P, rot, theta, RopePrecision::kF64);
  double near_diff = 0, far_diff = 0;
  for (int64_t p : {0, 1, 7, 100, 4095, 32767, 39999})
    for (int64_t i = 0; i < half; ++i) {
      const float inv_freq = 1.0f / powf(float(theta), float(2 * i) / float(rot));
      const float angle = float(p) * inv_freq;
      ASSERT_NEAR(f32.cos_Sr[p * half + i], cosf(angle), 2.4e-7) << p << " " << i;
      ASSERT_NEAR(f32.sin_Sr[p * half + i], sinf(angle), 2.4e-7) << p << " " << i;
      double& diff = p <= 100 ? near_diff : far_diff;
      diff = std::max(diff, std::fabs(double(f32.cos_Sr[p * half + i]) - f64.cos_Sr[p * half + i]));
    }
  std::printf("RoPE f32 vs f64 tables: %.2e up to position 100, %.2e at 4K-40K\n", near_diff, far_diff);
  EXPECT_LT(near_diff, 1e-5);
  EXPECT_GT(far_diff, 1e-4);
}

TEST(Rope, GradientIsInverseRotation) {
  const int64_t T = 3, H = 1, d = 8;
  RopeTable table;
  table.build(8, 4, 100.0);
  std::vector<int32_t> pos = {2, 3, 7};
  Vec x = random_vector(T * H * d, 1), probe = random_vector(T * H * d, 2);
  auto loss = [&] {
    Vec y = x;
    rope_apply<double>(y.data(), pos.data(), T, H, d, table, false);
    return dot(y, probe);
  };
  Vec dx = probe;
  rope_apply<double>(dx.data(), pos.data(), T, H, d, table, true);
  expect_gradient("rope", x, dx, loss);
}

TEST(CrossEntropy, GradientAndPaddingMask) {
  const int64_t T = 4, V = 7, real_V = 5;
  Vec z = random_vector(T * V, 1, 2.0);
  std::vector<int32_t> targets = {0, 4, -1, 2};
  Vec lse(T);
  auto loss = [&] {
    Vec l(T);
    cross_entropy_forward<double>(l.data(), lse.data(), z.data(), targets.data(), T, V, real_V);
    double s = 0;
    for (double v : l) s += v;
    return s / 3;
  };
  loss();
  Vec dz(T * V);
  cross_entropy_backward<double>(dz.data(), z.data(), lse.data(), targets.data(), T, V, real_V, 1.0 / 3);
  expect_gradient("xent", z, dz, loss);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t v = real_V; v < V; ++v) EXPECT_EQ(dz[t * V + v], 0.0);
  // Padding logits, however large, do not change the loss.
  double before = loss();
  z[0 * V + 6] = 1e3;
  EXPECT_DOUBLE_EQ(loss(), before);
}

TEST(Routing, SelectionUsesBiasButGateIsUnbiased) {
  // probs favour expert 0, but a bias on expert 1 makes it win; the gate stays p[1].
  std::vector<float> probs = {0.5f, 0.3f, 0.2f};
  std::vector<float> bias = {0.0f, 0.3f, -1.0f};
  int32_t choice = -5;
  float gate = 0;
  router_select<float>(&choice, &gate, probs.data(), bias.data(), 1, 3, 1, 2);
  EXPECT_EQ(choice, 1);
  EXPECT_FLOAT_EQ(gate, 0.3f);
}

TEST(Routing, TopKStopsAfterSkip) {
  std::vector<float> probs = {0.1f, 0.2f, 0.7f};  // slot 2 is skip
  std::vector<float> bias = {0, 0, 0};
  int32_t choice[2];
  float gate[2];
  router_select<float>(choice, gate, probs.data(), bias.data(), 1, 3, 2, 2);
  EXPECT_EQ(choice[0], 2);
  EXPECT_EQ(choice[1], kNoExpert);
  EXPECT_EQ(gate[1], 0.0f);
}

TEST(Routing, SoftmaxAuxAndZLossGradients) {
  const int64_t T = 5, N = 4, K = 1;
  Vec z = random_vector(T * N, 1, 1.5), probe = random_vector(T * N, 2);
  std::vector<int32_t> choice = {0, 1, 1, 3, 2};
  auto probs_of = [&] {
    Vec p(T * N);
    softmax_rows<double>(p.data(), z.data(), T, N);
    return p;
  };
  // softmax
  auto loss_sm = [&] { return dot(probs_of(), probe); };
  Vec p = probs_of(), dz(T * N, 0.0);
  softmax_rows_backward<double>(dz.data(), probe.data(), p.data(), T, N);
  expect_gradient("softmax", z, dz, loss_sm);
  // switch aux (through the softmax), selection held fixed
  auto loss_aux = [&] {
    Vec pp = probs_of();
    return switch_aux_loss<double>(nullptr, pp.data(), choice.data(), T, N, K, 0.01, 1.0);
  };
  p = probs_of();
  Vec dp(T * N, 0.0), dz_aux(T * N, 0.0);
  switch_aux_loss<double>(dp.data(), p.data(), choice.data(), T, N, K, 0.01, 1.0);
  softmax_rows_backward<double>(dz_aux.data(), dp.data(), p.data(), T, N);
  expect_gradient("switch aux", z, dz_aux, loss_aux, 1e-6);
  // z-loss
  auto loss_z = [&] {
    Vec pp = probs_of();
    return router_z_loss<double>(nullptr, z.data(), pp.data(), T, N, 0.001, 1.0);
  };
  Vec dz_z(T * N, 0.0);
  router_z_loss<double>(dz_z.data(), z.data(), p.data(), T, N, 0.001, 1.0);
  expect_gradient("z loss", z, dz_z, loss_z, 1e-6);
  // Uniform routing minimises the Switch loss at exactly coeff.
  Vec uniform(N * N, 0.25);
  std::vector<int32_t> one_each = {0, 1, 2, 3};
  EXPECT_NEAR(switch_aux_loss<double>(nullptr, uniform.data(), one_each.data(), N, N, 1, 0.01, 1.0), 0.01, 1e-12);
}

}  // namespace
}  // namespace zaya
