#include "zaya/ops/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "zaya/ops/grad_check.h"
#include "zaya/ops/test_util.h"

namespace zaya {
namespace {

using testing::dot;
using testing::random_vector;
using Vec = std::vector<double>;

// Direct causal GQA attention: full score matrix, mask, softmax, weighted sum.
// window > 0: row i sees keys max(0, i - window + 1) .. i only (spec §12).
// doc (document masking, [B * S] position of each row in its document): row
// i of sequence b also sees no key before i - doc[b * S + i].
Vec reference(const Vec& q, const Vec& k, const Vec& v, const AttentionShape& s, int64_t window = 0,
              const std::vector<int32_t>& doc = {}) {
  const int64_t B = s.batch, S = s.seq, Hq = s.q_heads, d = s.head_dim, G = Hq / s.kv_heads;
  const int64_t QW = s.q_width(), KW = s.kv_width();
  Vec o(B * S * QW, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < S; ++i) {
        const int64_t j = h / G;
        Vec sc(i + 1, 0.0);
        std::vector<bool> seen(i + 1, false);
        double mx = -1e300;
        for (int64_t c = 0; c <= i; ++c) {
          if (window > 0 && c < i - window + 1) continue;        // outside the window: masked
          if (!doc.empty() && c < i - doc[b * S + i]) continue;  // another document: masked
          seen[c] = true;
          double acc = 0;
          for (int64_t e = 0; e < d; ++e) acc += q[(b * S + i) * QW + h * d + e] * k[(b * S + c) * KW + j * d + e];
          sc[c] = acc / std::sqrt(double(d));
          mx = std::max(mx, sc[c]);
        }
        double sum = 0;
        for (int64_t c = 0; c <= i; ++c) sum += seen[c] ? (sc[c] = std::exp(sc[c] - mx)) : (sc[c] = 0.0);
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
  mutable Vec scratch;  // kept: the finite differences run the forward thousands of times
  Vec forward(Vec* lse_out = nullptr) const {
    const int64_t T = shape.batch * shape.seq;
    Vec o(T * shape.q_width()), lse(shape.batch * shape.q_heads * shape.seq);
    scratch.resize(attention_scratch_floats(shape, 64));
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

void check_gradients(AttentionShape shape) {
  AttnCase c(shape);
  const int64_t T = c.shape.batch * c.shape.seq;
  Vec probe = random_vector(T * c.shape.q_width(), 4);
  auto loss = [&] { return dot(c.forward(), probe); };
  Vec lse;
  Vec o = c.forward(&lse);
  Vec dq(c.q.size(), 0.0), dk(c.k.size(), 0.0), dv(c.v.size(), 0.0);
  Vec scratch(attention_scratch_floats(c.shape, 64));
  attention_backward<double>(dq.data(), dk.data(), dv.data(), probe.data(), c.q.data(), c.k.data(), c.v.data(),
                             o.data(), lse.data(), c.shape, scratch.data());
  const std::string w = " (window " + std::to_string(shape.window) + ")";
  if (shape.window == 1) {  // each row is its own value: q and k do not matter
    for (double x : dq) ASSERT_EQ(x, 0.0);
    for (double x : dk) ASSERT_EQ(x, 0.0);
  } else {
    testing::expect_gradient("attention q" + w, c.q, dq, loss);
    testing::expect_gradient("attention k" + w, c.k, dk, loss);
  }
  testing::expect_gradient("attention v" + w, c.v, dv, loss);
}

TEST(Attention, Gradients) { check_gradients({1, 67, 4, 2, 3}); }

// Sliding-window layers (spec §12): query i sees keys i-W+1..i. Small windows,
// a window across the query block boundary, and W >= S, which is full causal
// attention exactly.
TEST(Attention, SlidingWindowMatchesBruteForceMaskedAttention) {
  for (int64_t window : {1, 2, 3, 5, 64, 69}) {
    AttentionShape shape{2, 70, 4, 2, 4};
    shape.window = window;
    AttnCase c(shape);
    Vec got = c.forward(), want = reference(c.q, c.k, c.v, c.shape, window);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-12) << "window " << window << " " << i;
  }
  AttnCase full({2, 70, 4, 2, 4});
  const Vec want = full.forward();
  for (int64_t window : {70, 71, 1000}) {
    full.shape.window = window;
    EXPECT_EQ(full.forward(), want) << "window " << window << " >= S must be full causal attention";
  }
  // A window of 1: every row is its own value.
  AttnCase one({1, 9, 2, 1, 3});
  one.shape.window = 1;
  Vec o = one.forward();
  for (int64_t i = 0; i < 9; ++i)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t e = 0; e < 3; ++e) ASSERT_NEAR(o[i * 6 + h * 3 + e], one.v[i * 3 + e], 1e-15);
}

TEST(Attention, SlidingWindowGradients) {
  // {window, seq}: 67 rows span two query blocks, the second starting at key 62.
  for (auto [window, seq] : {std::pair<int64_t, int64_t>{1, 10}, {3, 67}}) {
    AttentionShape shape{1, seq, 4, 2, 3};
    shape.window = window;
    check_gradients(shape);
  }
}

// Context parallelism: some query rows (two chunks, as positions q_pos) against
// all keys give those rows of full attention, and the gradients of those rows'
// outputs (dK, dV over all keys).
// doc: document positions of the full sequences ([2 * 80]), empty for none.
void check_rows_at_positions(int64_t window, const std::vector<int32_t>& doc = {}) {
  AttentionShape shape{2, 80, 4, 2, 3};
  shape.window = window;
  if (!doc.empty()) shape.doc_pos = doc.data();
  AttnCase c(shape);
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
  std::vector<int32_t> doc_rows;  // the chosen rows' document positions
  for (int64_t b = 0; b < B && !doc.empty(); ++b)
    for (int64_t r = 0; r < R; ++r) doc_rows.push_back(doc[b * S + pos[r]]);
  if (!doc.empty()) sub.doc_pos = doc_rows.data();
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

TEST(Attention, QueryRowsAtPositionsMatchFullAttention) { check_rows_at_positions(0); }

// With a window the two chunks' rows (one query block) see two separate key
// ranges; 5 keeps them apart, 45 makes the later chunk reach into the earlier.
TEST(Attention, QueryRowsAtPositionsWithSlidingWindow) {
  for (int64_t window : {1, 5, 45}) {
    SCOPED_TRACE("window " + std::to_string(window));
    check_rows_at_positions(window);
  }
}

// Keys outside every row's window are never read: NaN there leaves the output
// and the gradients finite (a masked product would be NaN * 0 = NaN), and
// their dK, dV stay exactly zero.
TEST(Attention, SlidingWindowSkipsKeysOutsideEveryWindow) {
  const int64_t S = 200, W = 4;
  AttentionShape full{1, S, 2, 1, 4};
  AttnCase c(full);
  std::vector<int32_t> pos;
  for (int32_t i = 150; i < 170; ++i) pos.push_back(i);
  const int64_t R = int64_t(pos.size()), QW = full.q_width(), KW = full.kv_width();
  AttentionShape sub = full;
  sub.seq = R;
  sub.kv_seq = S;
  sub.q_pos = pos.data();
  sub.window = W;
  for (int64_t t = 0; t < S; ++t)
    if (t < pos.front() - W + 1 || t > pos.back())
      for (int64_t e = 0; e < KW; ++e) c.k[t * KW + e] = c.v[t * KW + e] = std::nan("");
  Vec q_rows(c.q.begin() + pos.front() * QW, c.q.begin() + (pos.back() + 1) * QW);
  Vec o(R * QW), lse(full.q_heads * R), scratch(attention_scratch_floats(sub, 64));
  attention_forward<double>(o.data(), lse.data(), q_rows.data(), c.k.data(), c.v.data(), sub, scratch.data());
  for (double x : o) ASSERT_TRUE(std::isfinite(x));
  Vec probe = random_vector(R * QW, 6), dq(q_rows.size(), 0.0), dk(c.k.size(), 0.0), dv(c.v.size(), 0.0);
  attention_backward<double>(dq.data(), dk.data(), dv.data(), probe.data(), q_rows.data(), c.k.data(), c.v.data(),
                             o.data(), lse.data(), sub, scratch.data());
  for (double x : dq) ASSERT_TRUE(std::isfinite(x));
  for (int64_t t = 0; t < S; ++t)
    for (int64_t e = 0; e < KW; ++e) {
      const bool outside = t < pos.front() - W + 1 || t > pos.back();
      ASSERT_TRUE(outside ? dk[t * KW + e] == 0 && dv[t * KW + e] == 0 : std::isfinite(dk[t * KW + e])) << t;
    }
}

// Block-diagonal causal attention: documents of one token, documents across
// the query block boundary (64) and a start right at it, with and without a window.
TEST(Attention, DocumentMaskingMatchesBruteForceMaskedAttention) {
  const std::vector<int32_t> doc = testing::doc_positions(140, {{0, 5, 6, 70, 100}, {0, 63, 64, 65, 139}});
  for (int64_t window : {0, 1, 3, 50}) {
    AttentionShape shape{2, 140, 4, 2, 4};
    shape.window = window;
    shape.doc_pos = doc.data();
    AttnCase c(shape);
    Vec got = c.forward(), want = reference(c.q, c.k, c.v, c.shape, window, doc);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-12) << "window " << window << " " << i;
  }
  // One document per sequence is no masking at all.
  AttnCase plain({2, 70, 4, 2, 4});
  const Vec want = plain.forward();
  const std::vector<int32_t> one = testing::doc_positions(70, {{0}, {0}});
  plain.shape.doc_pos = one.data();
  EXPECT_EQ(plain.forward(), want);
}

TEST(Attention, DocumentMaskingGradients) {
  // Short sequences (the forward test covers the query blocks): finite differences cost S^2 per element.
  const std::vector<int32_t> doc = testing::doc_positions(20, {{0, 3, 10, 11}, {0, 17}});
  for (int64_t window : {0, 5}) {
    AttentionShape shape{2, 20, 4, 2, 3};
    shape.window = window;
    shape.doc_pos = doc.data();
    check_gradients(shape);
  }
}

// Context parallelism with document masking: documents that begin in an
// earlier chunk, inside a chunk and at a chunk's first row (10 and 60).
TEST(Attention, QueryRowsAtPositionsWithDocumentMasking) {
  const std::vector<int32_t> doc = testing::doc_positions(80, {{0, 7, 15, 60, 65}, {0, 10, 30, 61}});
  for (int64_t window : {0, 5, 45}) {
    SCOPED_TRACE("window " + std::to_string(window));
    check_rows_at_positions(window, doc);
  }
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
