#include "zaya/ops/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "zaya/ops/grad_check.h"

namespace zaya {
namespace {

using testing::dot;
using testing::random_vector;
using Vec = std::vector<double>;

// Direct causal GQA attention: full score matrix, mask, softmax, weighted sum.
Vec reference(const Vec& q, const Vec& k, const Vec& v, const AttentionShape& s) {
  const int64_t B = s.batch, S = s.seq, Hq = s.q_heads, d = s.head_dim, G = Hq / s.kv_heads;
  const int64_t QW = s.q_width(), KW = s.kv_width();
  Vec o(B * S * QW, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < S; ++i) {
        const int64_t j = h / G;
        Vec sc(i + 1);
        double mx = -1e300;
        for (int64_t c = 0; c <= i; ++c) {
          double acc = 0;
          for (int64_t e = 0; e < d; ++e) acc += q[(b * S + i) * QW + h * d + e] * k[(b * S + c) * KW + j * d + e];
          sc[c] = acc / std::sqrt(double(d));
          mx = std::max(mx, sc[c]);
        }
        double sum = 0;
        for (double& x : sc) sum += (x = std::exp(x - mx));
        for (int64_t c = 0; c <= i; ++c)
          for (int64_t e = 0; e < d; ++e)
            o[(b * S + i) * QW + h * d + e] += sc[c] / sum * v[(b * S + c) * KW + j * d + e];
      }
  return o;
}

struct AttnCase {
  AttentionShape shape;
  Vec q, k, v;
  explicit AttnCase(AttentionShape s) : shape(s) {
    const int64_t T = s.batch * s.seq;
    q = random_vector(T * s.q_width(), 1, 1.5);
    k = random_vector(T * s.kv_width(), 2, 1.5);
    v = random_vector(T * s.kv_width(), 3);
  }
  Vec forward(Vec* lse_out = nullptr) const {
    const int64_t T = shape.batch * shape.seq;
    Vec o(T * shape.q_width()), lse(shape.batch * shape.q_heads * shape.seq);
    Vec scratch(attention_scratch_floats(shape, 64));
    attention_forward<double>(o.data(), lse.data(), q.data(), k.data(), v.data(), shape, scratch.data());
    if (lse_out) *lse_out = lse;
    return o;
  }
};

TEST(Attention, ForwardMatchesDirectFormulaAcrossBlocks) {
  AttnCase c({2, 70, 4, 2, 4});  // 70 > one query block of 64
  Vec got = c.forward(), want = reference(c.q, c.k, c.v, c.shape);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-12) << i;
}

TEST(Attention, Gradients) {
  AttnCase c({1, 67, 4, 2, 3});
  const int64_t T = c.shape.batch * c.shape.seq;
  Vec probe = random_vector(T * c.shape.q_width(), 4);
  auto loss = [&] { return dot(c.forward(), probe); };
  Vec lse;
  Vec o = c.forward(&lse);
  Vec dq(c.q.size(), 0.0), dk(c.k.size(), 0.0), dv(c.v.size(), 0.0);
  Vec scratch(attention_scratch_floats(c.shape, 64));
  attention_backward<double>(dq.data(), dk.data(), dv.data(), probe.data(), c.q.data(), c.k.data(), c.v.data(),
                             o.data(), lse.data(), c.shape, scratch.data());
  testing::expect_gradient("attention q", c.q, dq, loss);
  testing::expect_gradient("attention k", c.k, dk, loss);
  testing::expect_gradient("attention v", c.v, dv, loss);
}

// Context parallelism: some query rows (two chunks, as positions q_pos) against
// all keys give those rows of full attention, and the gradients of those rows'
// outputs (dK, dV over all keys).
TEST(Attention, QueryRowsAtPositionsMatchFullAttention) {
  AttnCase c({2, 80, 4, 2, 3});
  const std::vector<int32_t> pos = [] {
    std::vector<int32_t> p;
    for (int32_t i = 10; i < 20; ++i) p.push_back(i);  // chunk 1 of 8
    for (int32_t i = 60; i < 70; ++i) p.push_back(i);  // chunk 6 of 8
    return p;
  }();
  const int64_t B = c.shape.batch, S = c.shape.seq, R = int64_t(pos.size()), QW = c.shape.q_width();
  AttentionShape sub = c.shape;
  sub.seq = R;
  sub.kv_seq = S;
  sub.q_pos = pos.data();
  Vec q_rows(B * R * QW);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t r = 0; r < R; ++r)
      for (int64_t e = 0; e < QW; ++e) q_rows[(b * R + r) * QW + e] = c.q[(b * S + pos[r]) * QW + e];
  Vec o(B * R * QW), lse(B * c.shape.q_heads * R), scratch(attention_scratch_floats(sub, 64));
  attention_forward<double>(o.data(), lse.data(), q_rows.data(), c.k.data(), c.v.data(), sub, scratch.data());
  Vec full_lse;
  Vec full = c.forward(&full_lse);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t r = 0; r < R; ++r)
      for (int64_t e = 0; e < QW; ++e)
        ASSERT_NEAR(o[(b * R + r) * QW + e], full[(b * S + pos[r]) * QW + e], 1e-12) << b << " " << r;
  // Backward: a probe on the chosen rows only.
  Vec probe_rows = random_vector(B * R * QW, 6), probe_full(B * S * QW, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t r = 0; r < R; ++r)
      for (int64_t e = 0; e < QW; ++e) probe_full[(b * S + pos[r]) * QW + e] = probe_rows[(b * R + r) * QW + e];
  Vec dq(q_rows.size(), 0.0), dk(c.k.size(), 0.0), dv(c.v.size(), 0.0);
  attention_backward<double>(dq.data(), dk.data(), dv.data(), probe_rows.data(), q_rows.data(), c.k.data(), c.v.data(),
                             o.data(), lse.data(), sub, scratch.data());
  Vec fdq(c.q.size(), 0.0), fdk(c.k.size(), 0.0), fdv(c.v.size(), 0.0), fscratch(attention_scratch_floats(c.shape, 64));
  attention_backward<double>(fdq.data(), fdk.data(), fdv.data(), probe_full.data(), c.q.data(), c.k.data(), c.v.data(),
                             full.data(), full_lse.data(), c.shape, fscratch.data());
  for (size_t i = 0; i < dk.size(); ++i) ASSERT_NEAR(dk[i], fdk[i], 1e-12) << i;
  for (size_t i = 0; i < dv.size(); ++i) ASSERT_NEAR(dv[i], fdv[i], 1e-12) << i;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t r = 0; r < R; ++r)
      for (int64_t e = 0; e < QW; ++e) ASSERT_NEAR(dq[(b * R + r) * QW + e], fdq[(b * S + pos[r]) * QW + e], 1e-12);
}

TEST(Attention, FloatMatchesDouble) {
  AttnCase c({2, 130, 8, 2, 16});
  Vec want = c.forward();
  auto qf = testing::to_float(c.q), kf = testing::to_float(c.k), vf = testing::to_float(c.v);
  const int64_t T = c.shape.batch * c.shape.seq;
  std::vector<float> o(T * c.shape.q_width()), lse(c.shape.batch * c.shape.q_heads * c.shape.seq);
  std::vector<float> scratch(attention_scratch_floats(c.shape, 64));
  attention_forward<float>(o.data(), lse.data(), qf.data(), kf.data(), vf.data(), c.shape, scratch.data());
  for (size_t i = 0; i < o.size(); ++i) ASSERT_NEAR(o[i], want[i], 1e-4) << i;
}

}  // namespace
}  // namespace zaya
