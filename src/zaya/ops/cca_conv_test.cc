#include "zaya/ops/cca_conv.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "zaya/ops/cca_conv_bf16.h"
#include "zaya/ops/grad_check.h"
#include "zaya/ops/test_util.h"

namespace zaya {
namespace {

using testing::dot;
using testing::random_vector;
using Vec = std::vector<double>;

// PyTorch Conv1d semantics written out directly: x [C_in, L], w [C_out, C_in/groups, K],
// out[o, t] = b[o] + sum_{i, k} w[o, i, k] * x[g*Cg + i, t + k]  (cross-correlation, no padding).
Vec conv1d(const Vec& x, int64_t c_in, int64_t len, const Vec& w, const Vec& b, int64_t c_out, int64_t kernel,
           int64_t groups) {
  const int64_t cg_in = c_in / groups, cg_out = c_out / groups, out_len = len - kernel + 1;
  Vec out(c_out * out_len);
  for (int64_t o = 0; o < c_out; ++o)
    for (int64_t t = 0; t < out_len; ++t) {
      double acc = b[o];
      int64_t g = o / cg_out;
      for (int64_t i = 0; i < cg_in; ++i)
        for (int64_t k = 0; k < kernel; ++k) acc += w[(o * cg_in + i) * kernel + k] * x[(g * cg_in + i) * len + t + k];
      out[o * out_len + t] = acc;
    }
  return out;
}

// The reference recipe: left-pad the raw qk with (k0 - 1) + (k1 - 1) zeros,
// depthwise conv of k0 taps, grouped conv of k1 taps, no padding between.
Vec reference(const Vec& qk_BSC, const Vec& wA, const Vec& bA, const Vec& wB, const Vec& bB, const CcaConvShape& s) {
  const int64_t B = s.batch, S = s.seq, C = s.channels, L = s.qk_ld(), k0 = s.taps_a, k1 = s.taps_b;
  const int64_t pad = (k0 - 1) + (k1 - 1), n = S + pad;
  Vec out(B * S * C);
  for (int64_t b = 0; b < B; ++b) {
    Vec x(C * n, 0.0);  // [C, S + pad], channels-first as Conv1d wants
    for (int64_t t = 0; t < S; ++t)
      for (int64_t c = 0; c < C; ++c) x[c * n + t + pad] = qk_BSC[(b * S + t) * L + c];
    Vec a = conv1d(x, C, n, wA, bA, C, k0, C);
    Vec z = conv1d(a, C, n - k0 + 1, wB, bB, C, k1, s.groups());
    for (int64_t t = 0; t < S; ++t)
      for (int64_t c = 0; c < C; ++c) out[(b * S + t) * C + c] = z[c * S + t];
  }
  return out;
}

struct ConvCase {
  CcaConvShape shape{2, 5, 12, 4, 15};  // 3 groups of 4 channels; qk rows 15 wide (strided input)
  Vec qk, wA, bA, wB, bB;
  ConvCase(int64_t k0 = 2, int64_t k1 = 2, int64_t seq = 5) {
    shape.taps_a = k0;
    shape.taps_b = k1;
    shape.seq = seq;
    const int64_t C = shape.channels, d = shape.head_dim;
    qk = random_vector(shape.batch * shape.seq * shape.qk_ld(), 1);
    wA = random_vector(C * k0, 2);
    bA = random_vector(C, 3);
    wB = random_vector(C * d * k1, 4, 0.5);
    bB = random_vector(C, 5);
  }
  Vec forward(Vec* a_out = nullptr, const double* hist = nullptr) const {
    const int64_t B = shape.batch, S = shape.seq, C = shape.channels;
    Vec c(B * S * C), a(B * shape.a_rows() * C), scratch(cca_conv_scratch_floats(shape));
    cca_conv_forward<double>(c.data(), a.data(), qk.data(), wA.data(), bA.data(), wB.data(), bB.data(), shape,
                             scratch.data(), hist);
    if (a_out) *a_out = a;
    return c;
  }
  struct Grads {
    Vec dqk, dwA, dbA, dwB, dbB, dhist;
  };
  Grads backward(const Vec& probe, const double* hist = nullptr) const {
    const int64_t B = shape.batch, C = shape.channels;
    Vec a;
    forward(&a, hist);
    Grads g{Vec(qk.size(), 0.0), Vec(wA.size(), 0.0), Vec(C, 0.0),
            Vec(wB.size(), 0.0), Vec(C, 0.0),         Vec(B * shape.hist_ld() * shape.qk_ld(), 0.0)};
    Vec da(B * shape.a_rows() * C), scratch(2 * cca_conv_scratch_floats(shape));
    cca_conv_backward<double>(g.dqk.data(), g.dwA.data(), g.dbA.data(), g.dwB.data(), g.dbB.data(), probe.data(),
                              qk.data(), a.data(), wA.data(), bA.data(), wB.data(), shape, da.data(), scratch.data(),
                              hist, hist != nullptr ? g.dhist.data() : nullptr);
    return g;
  }
};

// Kernel sizes other than ZAYA1's 2/2 (cca_time0 / cca_time1 of the zaya1-legacy reference).
constexpr int64_t kTapPairs[][2] = {{3, 4}, {1, 3}, {4, 1}, {1, 1}, {2, 3}, {3, 2}};

TEST(CcaConv, MatchesPyTorchConv1dRecipe) {
  ConvCase k;
  Vec got = k.forward(), want = reference(k.qk, k.wA, k.bA, k.wB, k.bB, k.shape);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-12) << i;
  // Spec §3: z[0] = bB + WB0 . bA + WB1 . (bA + wA1 * qk[0]); check channel 0 of sequence 0.
  const int64_t d = k.shape.head_dim;
  double z0 = k.bB[0];
  for (int64_t i = 0; i < d; ++i)
    z0 += k.wB[i * 2 + 0] * k.bA[i] + k.wB[i * 2 + 1] * (k.bA[i] + k.wA[i * 2 + 1] * k.qk[i]);
  EXPECT_NEAR(got[0], z0, 1e-12);
}

TEST(CcaConv, Gradients) {
  ConvCase k;
  const int64_t B = k.shape.batch, S = k.shape.seq, C = k.shape.channels;
  Vec probe = random_vector(B * S * C, 9);
  auto loss = [&] { return dot(k.forward(), probe); };
  const ConvCase::Grads g = k.backward(probe);
  testing::expect_gradient("conv qk", k.qk, g.dqk, loss);
  testing::expect_gradient("conv wA", k.wA, g.dwA, loss);
  testing::expect_gradient("conv bA", k.bA, g.dbA, loss);
  testing::expect_gradient("conv wB", k.wB, g.dwB, loss);
  testing::expect_gradient("conv bB", k.bB, g.dbB, loss);
}

// Context parallelism: the sequence's tail (rows 3..S-1) convolved with the two
// rows before it as history gives the tail of the whole sequence's output, and
// the gradients of the history rows are those of rows 1 and 2.
TEST(CcaConv, HistoryRowsContinueASequence) {
  ConvCase k;
  const int64_t S = k.shape.seq, C = k.shape.channels, L = k.shape.qk_ld(), d = k.shape.head_dim, h0 = 3;
  k.shape.batch = 1;
  CcaConvShape tail = k.shape;
  tail.seq = S - h0;
  Vec full = k.forward();
  const double* hist = k.qk.data() + (h0 - 2) * L;  // rows 1 and 2
  const double* qk_tail = k.qk.data() + h0 * L;
  Vec c(tail.seq * C), a((tail.seq + 1) * C), scratch(2 * cca_conv_scratch_floats(tail));
  cca_conv_forward<double>(c.data(), a.data(), qk_tail, k.wA.data(), k.bA.data(), k.wB.data(), k.bB.data(), tail,
                           scratch.data(), hist);
  for (int64_t i = 0; i < tail.seq * C; ++i) ASSERT_NEAR(c[i], full[h0 * C + i], 1e-12) << i;
  // Backward of a probe on the tail only, against the whole sequence's.
  Vec probe_tail = random_vector(tail.seq * C, 17), probe(S * C, 0.0);
  std::copy(probe_tail.begin(), probe_tail.end(), probe.begin() + h0 * C);
  Vec da((tail.seq + 1) * C), dqk(tail.seq * L, 0.0), dhist(2 * L, 0.0);
  Vec dwA(C * 2, 0.0), dbA(C, 0.0), dwB(C * d * 2, 0.0), dbB(C, 0.0);
  cca_conv_backward<double>(dqk.data(), dwA.data(), dbA.data(), dwB.data(), dbB.data(), probe_tail.data(), qk_tail,
                            a.data(), k.wA.data(), k.bA.data(), k.wB.data(), tail, da.data(), scratch.data(), hist,
                            dhist.data());
  Vec full_a;
  k.forward(&full_a);
  Vec fda((S + 1) * C), fdqk(S * L, 0.0), fdwA(C * 2, 0.0), fdbA(C, 0.0), fdwB(C * d * 2, 0.0), fdbB(C, 0.0);
  cca_conv_backward<double>(fdqk.data(), fdwA.data(), fdbA.data(), fdwB.data(), fdbB.data(), probe.data(), k.qk.data(),
                            full_a.data(), k.wA.data(), k.bA.data(), k.wB.data(), k.shape, fda.data(), scratch.data());
  for (int64_t i = 0; i < 2 * L; ++i) ASSERT_NEAR(dhist[i], fdqk[(h0 - 2) * L + i], 1e-12) << i;
  for (int64_t i = 0; i < tail.seq * L; ++i) ASSERT_NEAR(dqk[i], fdqk[h0 * L + i], 1e-12) << i;
  for (int64_t i = 0; i < C * 2; ++i) ASSERT_NEAR(dwA[i], fdwA[i], 1e-12) << i;
}

// Each document of a packed sequence is convolved as a sequence of its own
// (the spec recipe on its rows alone): documents of 1, 2 and more tokens.
TEST(CcaConv, DocumentMaskingRestartsEachDocument) {
  ConvCase k;
  k.shape.seq = 9;
  const int64_t S = 9, C = k.shape.channels, L = k.shape.qk_ld();
  const std::vector<std::vector<int32_t>> starts = {{0, 3, 4, 6}, {0, 7}};
  const std::vector<int32_t> doc = testing::doc_positions(S, starts);
  k.qk = random_vector(k.shape.batch * S * L, 21);
  k.shape.doc_pos = doc.data();
  const Vec got = k.forward();
  for (int64_t b = 0; b < k.shape.batch; ++b)
    for (size_t n = 0; n < starts[b].size(); ++n) {
      const int64_t t0 = starts[b][n], t1 = n + 1 < starts[b].size() ? starts[b][n + 1] : S;
      CcaConvShape alone{1, t1 - t0, C, k.shape.head_dim, L};
      Vec qk(k.qk.begin() + (b * S + t0) * L, k.qk.begin() + (b * S + t1) * L);
      const Vec want = reference(qk, k.wA, k.bA, k.wB, k.bB, alone);
      for (int64_t i = 0; i < (t1 - t0) * C; ++i)
        ASSERT_NEAR(got[(b * S + t0) * C + i], want[i], 1e-12) << "sequence " << b << " document " << n << " " << i;
    }
  // Without masking the later documents see the earlier ones.
  k.shape.doc_pos = nullptr;
  EXPECT_GT(std::fabs(k.forward()[3 * C] - got[3 * C]), 1e-6);
}

TEST(CcaConv, DocumentMaskingGradients) {
  ConvCase k;
  k.shape.seq = 9;
  const int64_t B = k.shape.batch, S = 9, C = k.shape.channels;
  const std::vector<int32_t> doc = testing::doc_positions(S, {{0, 3, 4, 6}, {0, 1, 7}});
  k.qk = random_vector(B * S * k.shape.qk_ld(), 22);
  k.shape.doc_pos = doc.data();
  Vec probe = random_vector(B * S * C, 23);
  auto loss = [&] { return dot(k.forward(), probe); };
  const ConvCase::Grads g = k.backward(probe);
  testing::expect_gradient("masked conv qk", k.qk, g.dqk, loss);
  testing::expect_gradient("masked conv wA", k.wA, g.dwA, loss);
  testing::expect_gradient("masked conv bA", k.bA, g.dbA, loss);
  testing::expect_gradient("masked conv wB", k.wB, g.dwB, loss);
  testing::expect_gradient("masked conv bB", k.bB, g.dbB, loss);
}

// Context parallelism with document masking: a tail after history rows
// continues the masked sequence, whether its document began long before,
// one or two rows before the tail, or at its first row.
TEST(CcaConv, DocumentMaskingWithHistoryRows) {
  const int64_t h0 = 4;
  for (int32_t start : {0, 2, 3, 4, 5}) {
    SCOPED_TRACE("document start " + std::to_string(start));
    ConvCase k;
    k.shape.batch = 1;
    k.shape.seq = 9;
    const int64_t S = 9, C = k.shape.channels, L = k.shape.qk_ld(), d = k.shape.head_dim;
    k.qk = random_vector(S * L, 24);
    const std::vector<int32_t> doc = testing::doc_positions(S, {{0, start, 7}});
    k.shape.doc_pos = doc.data();
    CcaConvShape tail = k.shape;
    tail.seq = S - h0;
    tail.doc_pos = doc.data() + h0;
    const double* hist = k.qk.data() + (h0 - 2) * L;
    const double* qk_tail = k.qk.data() + h0 * L;
    Vec full_a;
    const Vec full = k.forward(&full_a);
    Vec c(tail.seq * C), a((tail.seq + 1) * C), scratch(2 * cca_conv_scratch_floats(tail));
    cca_conv_forward<double>(c.data(), a.data(), qk_tail, k.wA.data(), k.bA.data(), k.wB.data(), k.bB.data(), tail,
                             scratch.data(), hist);
    for (int64_t i = 0; i < tail.seq * C; ++i) ASSERT_NEAR(c[i], full[h0 * C + i], 1e-12) << i;
    Vec probe_tail = random_vector(tail.seq * C, 25), probe(S * C, 0.0);
    std::copy(probe_tail.begin(), probe_tail.end(), probe.begin() + h0 * C);
    Vec da((tail.seq + 1) * C), dqk(tail.seq * L, 0.0), dhist(2 * L, 0.0);
    Vec dwA(C * 2, 0.0), dbA(C, 0.0), dwB(C * d * 2, 0.0), dbB(C, 0.0);
    cca_conv_backward<double>(dqk.data(), dwA.data(), dbA.data(), dwB.data(), dbB.data(), probe_tail.data(), qk_tail,
                              a.data(), k.wA.data(), k.bA.data(), k.wB.data(), tail, da.data(), scratch.data(), hist,
                              dhist.data());
    Vec fda((S + 1) * C), fdqk(S * L, 0.0), fdwA(C * 2, 0.0), fdbA(C, 0.0), fdwB(C * d * 2, 0.0), fdbB(C, 0.0);
    cca_conv_backward<double>(fdqk.data(), fdwA.data(), fdbA.data(), fdwB.data(), fdbB.data(), probe.data(),
                              k.qk.data(), full_a.data(), k.wA.data(), k.bA.data(), k.wB.data(), k.shape, fda.data(),
                              scratch.data());
    for (int64_t i = 0; i < 2 * L; ++i) ASSERT_NEAR(dhist[i], fdqk[(h0 - 2) * L + i], 1e-12) << i;
    for (int64_t i = 0; i < tail.seq * L; ++i) ASSERT_NEAR(dqk[i], fdqk[h0 * L + i], 1e-12) << i;
    for (int64_t i = 0; i < C * 2; ++i) ASSERT_NEAR(dwA[i], fdwA[i], 1e-12) << i;
    for (int64_t i = 0; i < C; ++i) ASSERT_NEAR(dbA[i], fdbA[i], 1e-12) << i;
    for (int64_t i = 0; i < C * d * 2; ++i) ASSERT_NEAR(dwB[i], fdwB[i], 1e-12) << i;
  }
}

TEST(CcaConv, FloatMatchesDouble) {
  ConvCase k;
  k.shape = {3, 70, 24, 8, 0};
  const int64_t B = k.shape.batch, S = k.shape.seq, C = k.shape.channels, d = k.shape.head_dim;
  k.qk = random_vector(B * S * C, 11);
  k.wA = random_vector(C * 2, 12);
  k.bA = random_vector(C, 13);
  k.wB = random_vector(C * d * 2, 14, 0.3);
  k.bB = random_vector(C, 15);
  Vec want = k.forward();
  auto f = [](const Vec& v) { return testing::to_float(v); };
  std::vector<float> qk = f(k.qk), wA = f(k.wA), bA = f(k.bA), wB = f(k.wB), bB = f(k.bB);
  std::vector<float> c(B * S * C), a(B * (S + 1) * C), scratch(cca_conv_scratch_floats(k.shape));
  cca_conv_forward<float>(c.data(), a.data(), qk.data(), wA.data(), bA.data(), wB.data(), bB.data(), k.shape,
                          scratch.data());
  for (size_t i = 0; i < c.size(); ++i) ASSERT_NEAR(c[i], want[i], 2e-4) << i;
}

// The float backward of ZAYA1's taps walks each thread's channels in chunks of
// 256 (ops/cca_conv.cc): 600 channels make several chunks and uneven thread
// ranges. Its gradients must stay within float rounding of the double build of
// the same code (whose math the finite-difference tests above check) and have
// the same bits at any thread count (every channel's sums run over sequences
// and time in order).
TEST(CcaConv, FloatBackwardMatchesDoubleWithTheSameBitsAtAnyThreadCount) {
  ConvCase k;
  k.shape = {2, 9, 600, 8, 0};
  const int64_t B = k.shape.batch, S = k.shape.seq, C = k.shape.channels, d = k.shape.head_dim;
  k.qk = random_vector(B * S * C, 21);
  k.wA = random_vector(C * 2, 22);
  k.bA = random_vector(C, 23);
  k.wB = random_vector(C * d * 2, 24, 0.3);
  k.bB = random_vector(C, 25);
  const Vec probe = random_vector(B * S * C, 26);
  const ConvCase::Grads want = k.backward(probe);
  auto f = [](const Vec& v) { return testing::to_float(v); };
  const std::vector<float> qk = f(k.qk), wA = f(k.wA), bA = f(k.bA), wB = f(k.wB), bB = f(k.bB), dc = f(probe);
  std::vector<std::vector<float>> first;
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    std::vector<float> c(B * S * C), a(B * k.shape.a_rows() * C), scratch(2 * cca_conv_scratch_floats(k.shape));
    cca_conv_forward<float>(c.data(), a.data(), qk.data(), wA.data(), bA.data(), wB.data(), bB.data(), k.shape,
                            scratch.data());
    std::vector<float> dqk(qk.size(), 0.0f), dwA(wA.size(), 0.0f), dbA(C, 0.0f), dwB(wB.size(), 0.0f), dbB(C, 0.0f);
    std::vector<float> da(a.size());
    cca_conv_backward<float>(dqk.data(), dwA.data(), dbA.data(), dwB.data(), dbB.data(), dc.data(), qk.data(), a.data(),
                             wA.data(), bA.data(), wB.data(), k.shape, da.data(), scratch.data(), nullptr, nullptr);
    const std::vector<std::vector<float>> got = {dqk, dwA, dbA, dwB, dbB};
    const std::vector<const Vec*> ref = {&want.dqk, &want.dwA, &want.dbA, &want.dwB, &want.dbB};
    for (size_t j = 0; j < got.size(); ++j)
      for (size_t i = 0; i < got[j].size(); ++i)
        ASSERT_NEAR(got[j][i], (*ref[j])[i], 1e-3 * (1 + std::abs((*ref[j])[i]))) << "gradient " << j << " at " << i;
    if (first.empty()) {
      first = got;
      continue;
    }
    for (size_t j = 0; j < got.size(); ++j)
      EXPECT_EQ(std::memcmp(got[j].data(), first[j].data(), sizeof(float) * got[j].size()), 0)
          << "gradient " << j << " with " << threads << " threads";
  }
  omp_set_num_threads(saved);
}

// Conv B's products with bf16 operands (mixed precision, ops/cca_conv_bf16.h)
// against the float64 convolution: the output and every gradient within 2%
// of its largest magnitude (measured 0.2-0.6%), with ZAYA1's taps and others,
// and under document masking (whose float32 correction follows the bf16
// products); and the same bits on a second call.
TEST(CcaConv, Bf16ConvBMatchesTheFloat64Convolution) {
  struct Case {
    int64_t k0, k1;
    bool masked;
  };
  for (const Case& t : {Case{2, 2, false}, Case{3, 4, false}, Case{2, 2, true}, Case{1, 3, true}}) {
    SCOPED_TRACE("taps " + std::to_string(t.k0) + "/" + std::to_string(t.k1) + (t.masked ? " masked" : ""));
    ConvCase k(t.k0, t.k1);
    k.shape = {3, 40, 48, 16, 0};
    k.shape.taps_a = t.k0;
    k.shape.taps_b = t.k1;
    const int64_t B = 3, S = 40, C = 48, d = 16;
    const std::vector<int32_t> doc = testing::doc_positions(S, {{0, 7, 8, 30}, {0}, {0, 1, 2, 20}});
    if (t.masked) k.shape.doc_pos = doc.data();
    k.qk = random_vector(B * S * C, 31);
    k.wA = random_vector(C * t.k0, 32);
    k.bA = random_vector(C, 33);
    k.wB = random_vector(C * d * t.k1, 34, 0.3);
    k.bB = random_vector(C, 35);
    const Vec probe = random_vector(B * S * C, 36);
    const Vec want = k.forward();
    const ConvCase::Grads wg = k.backward(probe);
    auto f = [](const Vec& v) { return testing::to_float(v); };
    const std::vector<float> qk = f(k.qk), wA = f(k.wA), bA = f(k.bA), wB = f(k.wB), bB = f(k.bB), dc = f(probe);
    CcaConvShape sh = k.shape;
    Bf16Context bf16;
    sh.bf16 = &bf16;
    reserve_cca_conv_bf16_scratch(sh);
    auto run = [&](std::vector<std::vector<float>>& out) {
      std::vector<float> c(B * S * C), a(B * sh.a_rows() * C), scratch(2 * cca_conv_scratch_floats(sh));
      cca_conv_forward<float>(c.data(), a.data(), qk.data(), wA.data(), bA.data(), wB.data(), bB.data(), sh,
                              scratch.data());
      std::vector<float> dqk(qk.size(), 0.0f), dwA(wA.size(), 0.0f), dbA(C, 0.0f), dwB(wB.size(), 0.0f);
      std::vector<float> dbB(C, 0.0f), da(a.size());
      cca_conv_backward<float>(dqk.data(), dwA.data(), dbA.data(), dwB.data(), dbB.data(), dc.data(), qk.data(),
                               a.data(), wA.data(), bA.data(), wB.data(), sh, da.data(), scratch.data());
      out = {c, dqk, dwA, dbA, dwB, dbB};
    };
    std::vector<std::vector<float>> got, again;
    run(got);
    const std::vector<const Vec*> ref = {&want, &wg.dqk, &wg.dwA, &wg.dbA, &wg.dwB, &wg.dbB};
    const char* names[] = {"c", "dqk", "dwA", "dbA", "dwB", "dbB"};
    double worst = 0;
    for (size_t j = 0; j < got.size(); ++j) {
      double diff = 0, scale = 1e-30;
      for (size_t i = 0; i < got[j].size(); ++i) {
        diff = std::max(diff, std::fabs(double(got[j][i]) - (*ref[j])[i]));
        scale = std::max(scale, std::fabs((*ref[j])[i]));
      }
      EXPECT_LT(diff / scale, 2e-2) << names[j];
      worst = std::max(worst, diff / scale);
    }
    std::printf("bf16 conv B, taps %ld/%ld%s: worst relative error %.2e\n", long(t.k0), long(t.k1),
                t.masked ? " masked" : "", worst);
    EXPECT_GT(worst, 1e-5) << "conv B did not run in bf16";
    run(again);
    for (size_t j = 0; j < got.size(); ++j)
      EXPECT_EQ(std::memcmp(got[j].data(), again[j].data(), sizeof(float) * got[j].size()), 0) << names[j];
  }
}

TEST(CcaConv, OtherKernelSizesMatchPyTorchConv1dRecipe) {
  for (const auto& kk : kTapPairs) {
    ConvCase k(kk[0], kk[1], 7);
    Vec got = k.forward(), want = reference(k.qk, k.wA, k.bA, k.wB, k.bB, k.shape);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-12) << kk[0] << "/" << kk[1] << " " << i;
  }
  // k0 = 1, k1 = 1: two pointwise maps, z = bB + WB . (bA + wA * qk); channel 0 of row 0.
  ConvCase k(1, 1, 3);
  Vec got = k.forward();
  double z0 = k.bB[0];
  for (int64_t i = 0; i < k.shape.head_dim; ++i) z0 += k.wB[i] * (k.bA[i] + k.wA[i] * k.qk[i]);
  EXPECT_NEAR(got[0], z0, 1e-12);
}

TEST(CcaConv, OtherKernelSizesGradients) {
  for (const auto& kk : kTapPairs) {
    SCOPED_TRACE(::testing::Message() << "taps " << kk[0] << "/" << kk[1]);
    ConvCase k(kk[0], kk[1], 6);
    const int64_t B = k.shape.batch, S = k.shape.seq, C = k.shape.channels;
    Vec probe = random_vector(B * S * C, 9);
    auto loss = [&] { return dot(k.forward(), probe); };
    ConvCase::Grads g = k.backward(probe);
    testing::expect_gradient("conv qk", k.qk, g.dqk, loss);
    testing::expect_gradient("conv wA", k.wA, g.dwA, loss);
    testing::expect_gradient("conv bA", k.bA, g.dbA, loss);
    testing::expect_gradient("conv wB", k.wB, g.dwB, loss);
    testing::expect_gradient("conv bB", k.bB, g.dbB, loss);
  }
}

// Context parallelism with k taps: the history is the H = k0 + k1 - 2 rows
// before the chunk, possibly inside a wider buffer (hist_rows > H, as the
// attention block's halo of max(H, 1) rows); the tail of the sequence and the
// gradients of the history rows match the whole sequence's.
TEST(CcaConv, OtherKernelSizesHistoryContinuesASequence) {
  for (const auto& kk : kTapPairs) {
    SCOPED_TRACE(::testing::Message() << "taps " << kk[0] << "/" << kk[1]);
    ConvCase k(kk[0], kk[1], 11);
    k.shape.batch = 1;
    const int64_t S = k.shape.seq, C = k.shape.channels, L = k.shape.qk_ld(), H = k.shape.history(), h0 = 6;
    const int64_t R = std::max<int64_t>(H, 1) + 1;  // one unused leading row
    Vec full = k.forward();
    Vec probe_tail = random_vector((S - h0) * C, 17), probe(S * C, 0.0);
    std::copy(probe_tail.begin(), probe_tail.end(), probe.begin() + h0 * C);
    ConvCase::Grads fg = k.backward(probe);

    ConvCase tail = k;
    tail.shape.seq = S - h0;
    tail.shape.hist_rows = R;
    tail.qk.assign(k.qk.begin() + h0 * L, k.qk.end());
    Vec hist(R * L, 1e3);  // the unused row is garbage on purpose
    std::copy(k.qk.begin() + (h0 - H) * L, k.qk.begin() + h0 * L, hist.begin() + (R - H) * L);
    Vec c = tail.forward(nullptr, hist.data());
    for (int64_t i = 0; i < tail.shape.seq * C; ++i) ASSERT_NEAR(c[i], full[h0 * C + i], 1e-12) << i;
    ConvCase::Grads g = tail.backward(probe_tail, hist.data());
    for (int64_t i = 0; i < (R - H) * L; ++i) ASSERT_EQ(g.dhist[i], 0.0) << i;
    for (int64_t i = 0; i < H * L; ++i) ASSERT_NEAR(g.dhist[(R - H) * L + i], fg.dqk[(h0 - H) * L + i], 1e-12) << i;
    for (int64_t i = 0; i < tail.shape.seq * L; ++i) ASSERT_NEAR(g.dqk[i], fg.dqk[h0 * L + i], 1e-12) << i;
    for (size_t i = 0; i < g.dwA.size(); ++i) ASSERT_NEAR(g.dwA[i], fg.dwA[i], 1e-12) << i;
    for (size_t i = 0; i < g.dwB.size(); ++i) ASSERT_NEAR(g.dwB[i], fg.dwB[i], 1e-12) << i;
  }
}

}  // namespace
}  // namespace zaya
