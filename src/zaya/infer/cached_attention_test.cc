// Cached attention against a float64 brute-force masked softmax attention:
// full causal and sliding windows (W = 1, 3, 8), decode-sized and prefill
// chunks (the per-row and the sgemm-block paths, a block boundary crossed),
// keys split over a wrapped ring and a token-major workspace span, or over
// pages of 5 positions stored out of order (the engine's paged cache), which
// give the same bits as one contiguous cache; and in bf16 pages, which give
// the same bits as f32 pages of the same values.
#include "zaya/infer/cached_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "zaya/core/bf16.h"
#include "zaya/core/rng.h"

namespace zaya {
namespace {

constexpr int64_t kHq = 4, kHk = 2, kD = 16, kQW = kHq * kD;

// o[i] for query rows at positions past..past+S-1 over keys k_PKd (all
// positions, [P, Hk, d]): softmax over the keys j with lo(p) <= j <= p.
std::vector<double> brute_force(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                                int64_t past, int64_t S, int64_t window, int64_t Hq = kHq, int64_t Hk = kHk,
                                int64_t D = kD) {
  const int64_t QW = Hq * D;
  std::vector<double> o(S * QW, 0.0);
  for (int64_t i = 0; i < S; ++i) {
    const int64_t p = past + i, lo = window > 0 ? std::max<int64_t>(0, p - window + 1) : 0;
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t j = h / (Hq / Hk);
      std::vector<double> s;
      double mx = -1e300;
      for (int64_t t = lo; t <= p; ++t) {
        double dot = 0;
        for (int64_t c = 0; c < D; ++c) dot += double(q[i * QW + h * D + c]) * double(k[(t * Hk + j) * D + c]);
        s.push_back(dot / std::sqrt(double(D)));
        mx = std::max(mx, s.back());
      }
      double sum = 0;
      for (double& x : s) sum += (x = std::exp(x - mx));
      for (int64_t t = lo; t <= p; ++t)
        for (int64_t c = 0; c < D; ++c) o[i * QW + h * D + c] += s[t - lo] / sum * double(v[(t * Hk + j) * D + c]);
    }
  }
  return o;
}

std::vector<float> random_values(int64_t n, uint64_t stream) {
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = 2.0f * normal01(91, stream, i);
  return x;
}

struct Case {
  int64_t past, count, window;
};

class CachedAttentionWindow : public ::testing::TestWithParam<Case> {};

// Keys before `past` live in a ring of N = W - 1 rows (head-major, position t
// in row t mod N), the chunk's own keys token-major as in the engine's
// workspace; full attention reads one head-major cache of every position.
TEST_P(CachedAttentionWindow, MatchesBruteForce) {
  const Case cs = GetParam();
  const int64_t P = cs.past + cs.count, S = cs.count, W = cs.window;
  const std::vector<float> q = random_values(S * kQW, 1), k = random_values(P * kHk * kD, 2),
                           v = random_values(P * kHk * kD, 3);
  const std::vector<double> ref = brute_force(q, k, v, cs.past, S, W);
  std::vector<float> o(S * kQW, -7.0f), kc, vc;
  std::vector<CachedKeySpan> spans;
  CachedAttentionChunk ch;
  ch.q_SQ = q.data();
  ch.o_SQ = o.data();
  ch.past = cs.past;
  ch.count = S;
  ch.window = W;
  if (W == 0) {
    kc.resize(kHk * P * kD);
    vc.resize(kHk * P * kD);
    for (int64_t t = 0; t < P; ++t)
      for (int64_t j = 0; j < kHk; ++j)
        for (int64_t c = 0; c < kD; ++c) {
          kc[(j * P + t) * kD + c] = k[(t * kHk + j) * kD + c];
          vc[(j * P + t) * kD + c] = v[(t * kHk + j) * kD + c];
        }
    spans.push_back({kc.data(), vc.data(), P * kD, kD, 0, P});
  } else {
    const int64_t N = W - 1;
    kc.assign(std::max<int64_t>(1, kHk * N * kD), 1e9f);  // rows never written are poison
    vc.assign(kc.size(), 1e9f);
    for (int64_t t = std::max<int64_t>(0, cs.past - N); t < cs.past; ++t)
      for (int64_t j = 0; j < kHk; ++j)
        for (int64_t c = 0; c < kD; ++c) {
          kc[(j * N + t % N) * kD + c] = k[(t * kHk + j) * kD + c];
          vc[(j * N + t % N) * kD + c] = v[(t * kHk + j) * kD + c];
        }
    for (int64_t pos = std::max<int64_t>(0, cs.past - N); pos < cs.past;) {
      const int64_t row = pos % N, n = std::min(cs.past - pos, N - row);
      spans.push_back({kc.data() + row * kD, vc.data() + row * kD, N * kD, kD, pos, n});
      pos += n;
    }
    spans.push_back({k.data() + cs.past * kHk * kD, v.data() + cs.past * kHk * kD, kD, kHk * kD, cs.past, S});
  }
  ch.spans = spans.data();
  ch.span_count = int32_t(spans.size());
  const int64_t per_thread = cached_attention_scratch_floats(kHq / kHk, P, W, kD);
  std::vector<float> scratch(2 * per_thread);
  cached_attention({&ch, 1}, CachedAttentionShape{kHq, kHk, kD}, scratch.data(), per_thread, 2);
  double err = 0;
  for (int64_t i = 0; i < S * kQW; ++i) err = std::max(err, std::fabs(double(o[i]) - ref[i]));
  EXPECT_LT(err, 2e-5) << "past " << cs.past << " count " << cs.count << " window " << W;
  if (W != 0) return;
  // The same keys in pages of 5 positions ([Hk, 5, d] each), the pages stored in reverse order.
  constexpr int64_t kPage = 5;
  const int64_t pages = (P + kPage - 1) / kPage;
  std::vector<float> kp(pages * kHk * kPage * kD, 1e9f), vp(kp.size(), 1e9f);
  std::vector<CachedKeySpan> paged;
  for (int64_t i = 0; i < pages; ++i) {
    const int64_t at = (pages - 1 - i) * kHk * kPage * kD, n = std::min(kPage, P - i * kPage);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t j = 0; j < kHk; ++j)
        for (int64_t c = 0; c < kD; ++c) {
          kp[at + (j * kPage + t) * kD + c] = k[((i * kPage + t) * kHk + j) * kD + c];
          vp[at + (j * kPage + t) * kD + c] = v[((i * kPage + t) * kHk + j) * kD + c];
        }
    paged.push_back({kp.data() + at, vp.data() + at, kPage * kD, kD, i * kPage, n});
  }
  std::vector<float> o_paged(S * kQW, -7.0f);
  ch.o_SQ = o_paged.data();
  ch.spans = paged.data();
  ch.span_count = int32_t(paged.size());
  cached_attention({&ch, 1}, CachedAttentionShape{kHq, kHk, kD}, scratch.data(), per_thread, 2);
  EXPECT_EQ(std::memcmp(o_paged.data(), o.data(), sizeof(float) * o.size()), 0)
      << "paged: past " << cs.past << " count " << cs.count;
}

// The layouts above with the cache (pages of 5 for full attention, the ring
// for a sliding window) in bf16, as the engine's bf16 KV cache, and the
// chunk's own keys in f32: the same bits as f32 storage holding the bf16
// roundings (bf16 is widened exactly), on the per-row and the sgemm paths.
TEST_P(CachedAttentionWindow, Bf16CacheEqualsF32CacheOfItsValues) {
  const Case cs = GetParam();
  const int64_t P = cs.past + cs.count, S = cs.count, W = cs.window;
  const std::vector<float> q = random_values(S * kQW, 1);
  std::vector<float> k = random_values(P * kHk * kD, 2), v = random_values(P * kHk * kD, 3);
  for (float& x : k) x = bf16_to_float(float_to_bf16(x));
  for (float& x : v) x = bf16_to_float(float_to_bf16(x));
  // Position t of head j in row (slot of t) of a [rows, Hk, d]-per-unit store; f(t) gives (unit, row).
  constexpr int64_t kPage = 5;
  const int64_t N = W == 0 ? kPage : std::max<int64_t>(1, W - 1);  // rows per unit: a page, or the ring
  const int64_t units = W == 0 ? (P + kPage - 1) / kPage : 1;
  std::vector<float> kf(units * kHk * N * kD, 1e9f), vf(kf.size(), 1e9f);
  std::vector<uint16_t> kb(kf.size(), float_to_bf16(1e9f)), vb(kf.size(), float_to_bf16(1e9f));
  const int64_t cached = W == 0 ? P : cs.past;  // positions in the store
  for (int64_t t = W == 0 ? 0 : std::max<int64_t>(0, cs.past - N); t < cached; ++t) {
    const int64_t unit = W == 0 ? units - 1 - t / kPage : 0, row = W == 0 ? t % kPage : t % N;
    for (int64_t j = 0; j < kHk; ++j)
      for (int64_t c = 0; c < kD; ++c) {
        const int64_t at = ((unit * kHk + j) * N + row) * kD + c;
        kf[at] = k[(t * kHk + j) * kD + c];
        vf[at] = v[(t * kHk + j) * kD + c];
        kb[at] = float_to_bf16(kf[at]);
        vb[at] = float_to_bf16(vf[at]);
      }
  }
  std::vector<float> outs[2];
  for (int bf16 = 0; bf16 < 2; ++bf16) {
    std::vector<CachedKeySpan> spans;
    const int64_t first = W == 0 ? 0 : std::max<int64_t>(0, cs.past - N);
    for (int64_t pos = first; pos < cached;) {
      const int64_t unit = W == 0 ? units - 1 - pos / kPage : 0, row = W == 0 ? pos % kPage : pos % N;
      const int64_t n = std::min(cached - pos, N - row), at = unit * kHk * N * kD + row * kD;
      if (bf16)
        spans.push_back({kb.data() + at, vb.data() + at, N * kD, kD, pos, n, true});
      else
        spans.push_back({kf.data() + at, vf.data() + at, N * kD, kD, pos, n, false});
      pos += n;
    }
    if (W != 0)
      spans.push_back({k.data() + cs.past * kHk * kD, v.data() + cs.past * kHk * kD, kD, kHk * kD, cs.past, S, false});
    outs[bf16].assign(S * kQW, -7.0f);
    CachedAttentionChunk ch;
    ch.q_SQ = q.data();
    ch.o_SQ = outs[bf16].data();
    ch.past = cs.past;
    ch.count = S;
    ch.window = W;
    ch.spans = spans.data();
    ch.span_count = int32_t(spans.size());
    const int64_t per_thread = cached_attention_scratch_floats(kHq / kHk, P, W, kD);
    std::vector<float> scratch(2 * per_thread);
    cached_attention({&ch, 1}, CachedAttentionShape{kHq, kHk, kD}, scratch.data(), per_thread, 2);
  }
  EXPECT_EQ(std::memcmp(outs[0].data(), outs[1].data(), sizeof(float) * outs[0].size()), 0)
      << "past " << cs.past << " count " << cs.count << " window " << W;
  double err = 0;
  const std::vector<double> ref = brute_force(q, k, v, cs.past, S, W);
  for (int64_t i = 0; i < S * kQW; ++i) err = std::max(err, std::fabs(double(outs[1][i]) - ref[i]));
  EXPECT_LT(err, 2e-5);
}

// The per-row (decode) path for every head shape its vector kernels split
// differently: head dims that fill 1-4 vectors of a column tile, more than one
// tile, or leave a remainder the vectors cannot take (the scalar loop), and
// query groups that fill a tile of heads or leave one or two over; against the
// brute force, and a bf16 cache with the bits of an f32 cache of its values.
TEST(CachedAttention, DecodeRowsMatchBruteForceForEveryHeadShape) {
  const int64_t Hk = 2, past = 37;
  for (int64_t D : {8, 16, 24, 40, 64, 96, 136, 12})
    for (int64_t G : {1, 2, 3, 5, 9})
      for (int64_t S : {1, 3}) {
        const int64_t Hq = G * Hk, QW = Hq * D, P = past + S;
        const std::vector<float> q = random_values(S * QW, 4 + D);
        std::vector<float> k = random_values(P * Hk * D, 5 + G), v = random_values(P * Hk * D, 6 + S);
        for (float& x : k) x = bf16_to_float(float_to_bf16(x));
        for (float& x : v) x = bf16_to_float(float_to_bf16(x));
        // One head-major cache of every position ([Hk, P, D]), f32 and bf16.
        std::vector<float> kc(k.size()), vc(v.size());
        std::vector<uint16_t> kb(k.size()), vb(v.size());
        for (int64_t t = 0; t < P; ++t)
          for (int64_t j = 0; j < Hk; ++j)
            for (int64_t c = 0; c < D; ++c) {
              const int64_t at = (j * P + t) * D + c, from = (t * Hk + j) * D + c;
              kc[at] = k[from], vc[at] = v[from];
              kb[at] = float_to_bf16(k[from]), vb[at] = float_to_bf16(v[from]);
            }
        const CachedAttentionShape shape{Hq, Hk, D};
        const int64_t per_thread = cached_attention_scratch_floats(G, P, 0, D);
        std::vector<float> scratch(2 * per_thread), outs[2];
        for (int bf16 = 0; bf16 < 2; ++bf16) {
          const CachedKeySpan span = bf16 ? CachedKeySpan{kb.data(), vb.data(), P * D, D, 0, P, true}
                                          : CachedKeySpan{kc.data(), vc.data(), P * D, D, 0, P, false};
          outs[bf16].assign(S * QW, -7.0f);
          CachedAttentionChunk ch;
          ch.q_SQ = q.data();
          ch.o_SQ = outs[bf16].data();
          ch.past = past;
          ch.count = S;
          ch.spans = &span;
          ch.span_count = 1;
          cached_attention({&ch, 1}, shape, scratch.data(), per_thread, 2);
        }
        const std::vector<double> ref = brute_force(q, k, v, past, S, 0, Hq, Hk, D);
        double err = 0;
        for (int64_t i = 0; i < S * QW; ++i) err = std::max(err, std::fabs(double(outs[0][i]) - ref[i]));
        EXPECT_LT(err, 2e-5) << "D " << D << " G " << G << " S " << S;
        EXPECT_EQ(std::memcmp(outs[0].data(), outs[1].data(), sizeof(float) * outs[0].size()), 0)
            << "D " << D << " G " << G << " S " << S;
      }
}

// Speculative verification (engine.h: a rowwise chunk) walks the keys once for
// several rows (rows_together in cached_attention.cc); each row must still
// have the bits it has alone, as a one-token step at its position: a chunk of
// S rows against S chunks of one row, over pages of 5 positions (stored out of
// order, f32 and bf16), for head shapes the vector tiles split differently, a
// group too large for one pass of the scratch (G 9: the rows go in groups), a
// window every row's keys fit in, and one they do not (each row on its own).
TEST(CachedAttention, RowsOfAVerifiedChunkHaveTheBitsOfSingleRows) {
  const int64_t Hk = 2, past = 41;
  constexpr int64_t kPage = 5;
  for (int64_t D : {16, 64, 80})
    for (int64_t G : {1, 2, 3, 9})
      for (int64_t S : {2, 5, 17})
        for (int64_t W : {0, 200, 30})
          for (int bf16 = 0; bf16 < 2; ++bf16) {
            const int64_t Hq = G * Hk, QW = Hq * D, P = past + S, pages = (P + kPage - 1) / kPage;
            const std::vector<float> q = random_values(S * QW, 7 + D + G);
            std::vector<float> k = random_values(P * Hk * D, 8 + S), v = random_values(P * Hk * D, 9 + W);
            if (bf16) {
              for (float& x : k) x = bf16_to_float(float_to_bf16(x));
              for (float& x : v) x = bf16_to_float(float_to_bf16(x));
            }
            // Page i ([Hk, kPage, D]) stored at slot pages - 1 - i.
            std::vector<float> kf(pages * Hk * kPage * D, 1e9f), vf(kf.size(), 1e9f);
            std::vector<uint16_t> kb(kf.size()), vb(kf.size());
            for (int64_t t = 0; t < P; ++t)
              for (int64_t j = 0; j < Hk; ++j)
                for (int64_t c = 0; c < D; ++c) {
                  const int64_t at = (((pages - 1 - t / kPage) * Hk + j) * kPage + t % kPage) * D + c;
                  kf[at] = k[(t * Hk + j) * D + c];
                  vf[at] = v[(t * Hk + j) * D + c];
                }
            for (size_t i = 0; i < kf.size(); ++i) kb[i] = float_to_bf16(kf[i]), vb[i] = float_to_bf16(vf[i]);
            // The pages' spans of positions [0, end).
            auto spans_to = [&](int64_t end) {
              std::vector<CachedKeySpan> sp;
              for (int64_t i = 0; i * kPage < end; ++i) {
                const int64_t at = (pages - 1 - i) * Hk * kPage * D, n = std::min(kPage, end - i * kPage);
                if (bf16)
                  sp.push_back({kb.data() + at, vb.data() + at, kPage * D, D, i * kPage, n, true});
                else
                  sp.push_back({kf.data() + at, vf.data() + at, kPage * D, D, i * kPage, n, false});
              }
              return sp;
            };
            const CachedAttentionShape shape{Hq, Hk, D};
            const int64_t per_thread = cached_attention_scratch_floats(G, P, W, D);
            std::vector<float> scratch(2 * per_thread), together(S * QW, -7.0f), alone(S * QW, -7.0f);
            const std::vector<CachedKeySpan> all = spans_to(P);
            CachedAttentionChunk ch;
            ch.q_SQ = q.data();
            ch.o_SQ = together.data();
            ch.spans = all.data();
            ch.span_count = int32_t(all.size());
            ch.past = past;
            ch.count = S;
            ch.window = W;
            ch.rowwise = true;
            cached_attention({&ch, 1}, shape, scratch.data(), per_thread, 2);
            for (int64_t i = 0; i < S; ++i) {
              const std::vector<CachedKeySpan> mine = spans_to(past + i + 1);
              CachedAttentionChunk one = ch;
              one.q_SQ = q.data() + i * QW;
              one.o_SQ = alone.data() + i * QW;
              one.spans = mine.data();
              one.span_count = int32_t(mine.size());
              one.past = past + i;
              one.count = 1;
              cached_attention({&one, 1}, shape, scratch.data(), per_thread, 1);
            }
            EXPECT_EQ(std::memcmp(together.data(), alone.data(), sizeof(float) * together.size()), 0)
                << "D " << D << " G " << G << " S " << S << " W " << W << " bf16 " << bf16;
            const std::vector<double> ref = brute_force(q, k, v, past, S, W, Hq, Hk, D);
            double err = 0;
            for (int64_t i = 0; i < S * QW; ++i) err = std::max(err, std::fabs(double(together[i]) - ref[i]));
            EXPECT_LT(err, 2e-5) << "D " << D << " G " << G << " S " << S << " W " << W;
          }
}

INSTANTIATE_TEST_SUITE_P(Cases, CachedAttentionWindow,
                         ::testing::Values(Case{0, 1, 0}, Case{9, 1, 0}, Case{5, 70, 0},
                                           Case{13, 3, 0},                                       // full attention
                                           Case{0, 1, 3}, Case{1, 1, 3}, Case{2, 1, 3},          // ring filling
                                           Case{11, 1, 3}, Case{12, 3, 3}, Case{20, 4, 3},       // decode, wrapped
                                           Case{0, 20, 3}, Case{7, 9, 3}, Case{13, 70, 3},       // prefill blocks
                                           Case{30, 1, 1}, Case{4, 9, 1},                        // only the query
                                           Case{19, 2, 8}, Case{5, 66, 8}, Case{100, 130, 8}));  // wider window

}  // namespace
}  // namespace zaya
