#include "zaya/ops/attention_bf16.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "zaya/ops/grad_check.h"
#include "zaya/ops/test_util.h"

namespace zaya {
namespace {

using testing::random_vector;
using testing::to_float;
using Vec = std::vector<double>;

// The largest |got - want| over the largest |want|.
double relative_error(const std::vector<float>& got, const Vec& want) {
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::fabs(double(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  return diff / scale;
}

// The stated tolerance of the bf16 kernel against the float64 kernel of
// ops/attention.h: outputs and gradients within 2% of their largest
// magnitude (Q, K, V, P, dO and dS each rounded to 8 significant bits; the
// cases below measure 0.3-0.9%).
constexpr double kTolerance = 2e-2;

struct Bf16Case {
  AttentionShape shape;  // query rows: shape.seq per sequence, keys: shape.keys()
  Vec q, k, v, probe;
  explicit Bf16Case(AttentionShape s) : shape(s) {
    q = random_vector(s.batch * s.seq * s.q_width(), 1, 1.5);
    k = random_vector(s.batch * s.keys() * s.kv_width(), 2, 1.5);
    v = random_vector(s.batch * s.keys() * s.kv_width(), 3);
    probe = random_vector(s.batch * s.seq * s.q_width(), 4);
  }

  // Runs both kernels and checks the bf16 one against the double one.
  void check() const {
    const AttentionShape& s = shape;
    const int64_t B = s.batch, S = s.seq, Sk = s.keys();
    Vec o(B * S * s.q_width()), lse(B * s.q_heads * S), scratch(attention_scratch_floats(s, 64));
    attention_forward<double>(o.data(), lse.data(), q.data(), k.data(), v.data(), s, scratch.data());
    Vec dq(q.size(), 0.0), dk(k.size(), 0.0), dv(v.size(), 0.0);
    attention_backward<double>(dq.data(), dk.data(), dv.data(), probe.data(), q.data(), k.data(), v.data(), o.data(),
                               lse.data(), s, scratch.data());

    Bf16Context ctx;
    reserve_attention_bf16_scratch(ctx, s);
    const std::vector<float> qf = to_float(q), kf = to_float(k), vf = to_float(v), pf = to_float(probe);
    std::vector<float> of(o.size()), lsef(lse.size());
    attention_forward_bf16(ctx, of.data(), lsef.data(), qf.data(), kf.data(), vf.data(), s);
    // The gradients are added into what the buffers hold.
    std::vector<float> dqf(q.size(), 1.0f), dkf(k.size(), -1.0f), dvf(v.size(), 0.5f);
    attention_backward_bf16(ctx, dqf.data(), dkf.data(), dvf.data(), pf.data(), qf.data(), kf.data(), vf.data(),
                            of.data(), lsef.data(), s);
    for (float& x : dqf) x -= 1.0f;
    for (float& x : dkf) x += 1.0f;
    for (float& x : dvf) x -= 0.5f;

    const double e_o = relative_error(of, o), e_lse = relative_error(lsef, lse);
    const double e_dq = relative_error(dqf, dq), e_dk = relative_error(dkf, dk), e_dv = relative_error(dvf, dv);
    std::printf("B %ld rows %ld keys %ld heads %ld/%ld window %ld: o %.2e lse %.2e dq %.2e dk %.2e dv %.2e\n", long(B),
                long(S), long(Sk), long(s.q_heads), long(s.kv_heads), long(s.window), e_o, e_lse, e_dq, e_dk, e_dv);
    EXPECT_LT(e_o, kTolerance);
    EXPECT_LT(e_lse, 1e-2);  // the statistics are float32, from bf16-operand scores
    EXPECT_LT(e_dq, kTolerance);
    EXPECT_LT(e_dk, kTolerance);
    EXPECT_LT(e_dv, kTolerance);
    EXPECT_GT(e_o, 1e-5) << "the forward did not run in bf16";  // float32 would be within 1e-6

    // Bitwise determinism: the same call gives the same bits.
    std::vector<float> o2(o.size()), lse2(lse.size());
    attention_forward_bf16(ctx, o2.data(), lse2.data(), qf.data(), kf.data(), vf.data(), s);
    EXPECT_EQ(std::memcmp(o2.data(), of.data(), sizeof(float) * o2.size()), 0);
    std::vector<float> dk2(k.size(), -1.0f);
    std::vector<float> dq2(q.size(), 1.0f), dv2(v.size(), 0.5f);
    attention_backward_bf16(ctx, dq2.data(), dk2.data(), dv2.data(), pf.data(), qf.data(), kf.data(), vf.data(),
                            of.data(), lsef.data(), s);
    for (float& x : dk2) x += 1.0f;
    EXPECT_EQ(std::memcmp(dk2.data(), dkf.data(), sizeof(float) * dk2.size()), 0);
  }
};

TEST(AttentionBf16, CausalAcrossQueryBlocksMatchesTheFloat64Kernel) {
  Bf16Case({2, 150, 4, 2, 64}).check();  // 150 rows: blocks of 64, 64 and 22
}

TEST(AttentionBf16, QueryGroupsOfOneAndFourMatchTheFloat64Kernel) {
  Bf16Case({1, 70, 2, 2, 32}).check();  // G = 1
  Bf16Case({2, 40, 8, 2, 32}).check();  // G = 4
}

TEST(AttentionBf16, SlidingWindowMatchesTheFloat64Kernel) {
  for (int64_t window : {2, 40, 100}) {  // (1: every row sees itself only; dQ and dK are exactly 0)
    SCOPED_TRACE("window " + std::to_string(window));
    AttentionShape s{2, 150, 4, 2, 64};
    s.window = window;
    Bf16Case(s).check();
  }
}

// Context parallelism: a rank's rows (two chunks of each sequence, as
// positions) against all keys, full causal and windowed.
TEST(AttentionBf16, QueryRowsAtPositionsMatchTheFloat64Kernel) {
  std::vector<int32_t> pos;
  for (int32_t i = 10; i < 20; ++i) pos.push_back(i);    // chunk 1 of 8
  for (int32_t i = 120; i < 130; ++i) pos.push_back(i);  // chunk 12 of 16 ... of 160 keys
  for (int64_t window : {0, 5, 45}) {
    SCOPED_TRACE("window " + std::to_string(window));
    AttentionShape s{2, int64_t(pos.size()), 4, 2, 64, 160};
    s.q_pos = pos.data();
    s.window = window;
    Bf16Case(s).check();
  }
}

TEST(AttentionBf16, DocumentMaskingKeepsTheFloat32Kernel) {
  std::vector<int32_t> doc(2 * 8, 0);
  AttentionShape s{2, 8, 2, 1, 4};
  EXPECT_TRUE(attention_bf16_supports(s));
  s.doc_pos = doc.data();
  EXPECT_FALSE(attention_bf16_supports(s));
}

}  // namespace
}  // namespace zaya
