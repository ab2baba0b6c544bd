#include "zaya/ops/cca_mix.h"

#include <gtest/gtest.h>

#include <vector>

#include "zaya/ops/grad_check.h"

namespace zaya {
namespace {

using testing::dot;
using testing::random_vector;
using Vec = std::vector<double>;

CcaMixShape shape() {
  CcaMixShape s{2, 3, 4, 2, 3, 0};
  s.in_stride = s.q_width() + 2 * s.kv_width() + 1;  // one spare column: strides must be honoured
  return s;
}

TEST(CcaMix, MeanTermsMatchSpecAndGradients) {
  CcaMixShape s = shape();
  const int64_t T = s.batch * s.seq, QW = s.q_width(), KW = s.kv_width(), C = QW + KW;
  Vec qkv = random_vector(T * s.in_stride, 1), c = random_vector(T * C, 2);
  Vec pq = random_vector(T * QW, 3), pk = random_vector(T * KW, 4);
  auto run = [&](Vec& q, Vec& k) {
    q.assign(T * QW, 0);
    k.assign(T * KW, 0);
    cca_mean_terms_forward<double>(q.data(), k.data(), c.data(), qkv.data(), s);
  };
  Vec q, k;
  run(q, k);
  // Spec §3: head 3 uses KV head 1 (G = 2); mk[1] = (mean(q[2], q[3]) + k[1]) / 2.
  const int64_t d = s.head_dim, t = 4, i = 1;
  const double* row = qkv.data() + t * s.in_stride;
  EXPECT_NEAR(q[t * QW + 3 * d + i], c[t * C + 3 * d + i] + (row[3 * d + i] + row[QW + 1 * d + i]) / 2, 1e-14);
  EXPECT_NEAR(k[t * KW + 1 * d + i],
              c[t * C + QW + d + i] + ((row[2 * d + i] + row[3 * d + i]) / 2 + row[QW + d + i]) / 2, 1e-14);
  auto loss = [&] {
    Vec qq, kk;
    run(qq, kk);
    return dot(qq, pq) + dot(kk, pk);
  };
  Vec dc(T * C, 0.0), dqkv(T * s.in_stride, 0.0);
  cca_mean_terms_backward<double>(dc.data(), dqkv.data(), pq.data(), pk.data(), s);
  testing::expect_gradient("mean terms qkv", qkv, dqkv, loss);
  testing::expect_gradient("mean terms c", c, dc, loss);
}

TEST(CcaMix, ValueStreamsShiftWithinSequences) {
  CcaMixShape s = shape();
  const int64_t T = s.batch * s.seq, KW = s.kv_width(), half = KW / 2, off = s.q_width() + KW;
  Vec qkv = random_vector(T * s.in_stride, 1), probe = random_vector(T * KW, 2);
  Vec v(T * KW);
  cca_values_forward<double>(v.data(), qkv.data(), s);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t t = 0; t < s.seq; ++t) {
      const int64_t r = b * s.seq + t;
      for (int64_t i = 0; i < half; ++i) {
        EXPECT_EQ(v[r * KW + i], qkv[r * s.in_stride + off + i]);
        EXPECT_EQ(v[r * KW + half + i], t == 0 ? 0.0 : qkv[(r - 1) * s.in_stride + off + half + i]);
      }
    }
  auto loss = [&] {
    Vec vv(T * KW);
    cca_values_forward<double>(vv.data(), qkv.data(), s);
    return dot(vv, probe);
  };
  Vec dqkv(T * s.in_stride, 0.0);
  cca_values_backward<double>(dqkv.data(), probe.data(), s);
  testing::expect_gradient("value streams", qkv, dqkv, loss);
}

// Document masking: the delayed stream restarts at every document start
// (doc_pos 0) as at a sequence start; a piece whose first row continues a
// document reads the history row, one whose first row starts a document does not.
TEST(CcaMix, ValueStreamsRestartAtDocumentStarts) {
  CcaMixShape s = shape();
  s.seq = 6;
  const int64_t T = s.batch * s.seq, KW = s.kv_width(), half = KW / 2, off = s.q_width() + KW;
  const std::vector<int32_t> doc = {3, 4, 0, 0, 1, 2, 0, 1, 2, 3, 4, 0};  // sequence 0 continues a document
  s.doc_pos = doc.data();
  Vec qkv = random_vector(T * s.in_stride, 5), hist = random_vector(s.batch * 2 * s.in_stride, 6);
  Vec probe = random_vector(T * KW, 7);
  auto run = [&] {
    Vec v(T * KW);
    cca_values_forward<double>(v.data(), qkv.data(), s, hist.data());
    return v;
  };
  const Vec v = run();
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t t = 0; t < s.seq; ++t) {
      const int64_t r = b * s.seq + t;
      const double* prev = doc[r] == 0 ? nullptr
                           : t > 0     ? qkv.data() + (r - 1) * s.in_stride
                                       : hist.data() + (b * 2 + 1) * s.in_stride;
      for (int64_t i = 0; i < half; ++i) {
        EXPECT_EQ(v[r * KW + i], qkv[r * s.in_stride + off + i]);
        EXPECT_EQ(v[r * KW + half + i], prev == nullptr ? 0.0 : prev[off + half + i]) << r;
      }
    }
  auto loss = [&] { return dot(run(), probe); };
  Vec dqkv(T * s.in_stride, 0.0), dhist(hist.size(), 0.0);
  cca_values_backward<double>(dqkv.data(), probe.data(), s, dhist.data());
  testing::expect_gradient("masked value streams", qkv, dqkv, loss);
  testing::expect_gradient("masked value streams' history", hist, dhist, loss);
  // The second sequence starts a document at its first row: its history is unused.
  for (int64_t i = 0; i < 2 * s.in_stride; ++i) EXPECT_EQ(dhist[2 * s.in_stride + i], 0.0);
}

}  // namespace
}  // namespace zaya
