// The expert-parallel exchange of one MoE half-layer on its own
// (model/moe_experts.h): an ep group, each rank holding E / ep experts and its
// own tokens, gives the expert outputs y, the input gradients dxp and the
// expert weight gradients of one rank that holds every expert and processes
// the tokens of the whole group (concatenated in ep-rank order). Every ep size
// dividing both the world and the expert count is checked, with the world
// split into world / ep groups of consecutive ranks as dist/mesh.cc does.
//
// Tolerance: every compared value is a float32 sum of n < 100 terms: D, F
// or 2F (y, dxp) or the rows one expert processes (weight gradients). Both
// sides feed the same rows in the same order (the exchange keeps source ranks
// in order and tokens in order within a source), but oneDNN may block a GEMM
// of M rows differently from one of M' rows, and two orders of an n-term sum
// differ by at most 2 n u sum|terms| (u = 2^-24, so 2 n u < 1.2e-5). For the
// zero-mean random terms here sum|terms| is about sqrt(n) <= 10 times the
// result, so ||got - ref|| <= 1e-4 ||ref|| (per routed row for y and dxp, per
// expert tensor for the weight gradients) covers any order; 1e-7 absolute
// lets an expert without rows pass only with a zero gradient. Measured: 0,
// bit for bit, under OMP_NUM_THREADS=1 (printed per expert count and ep size).
// A misrouted row is off by O(1) of its own norm and moves its expert's
// gradients by about 1 / sqrt(rows) >= 0.1 (swapping the row counts of two
// experts of one rank gave >= 0.97 on rows and >= 0.29 on gradients).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <vector>

#include "tests/mpi/mpi_test_env.h"
#include "zaya/core/arena.h"
#include "zaya/core/bf16.h"
#include "zaya/core/rng.h"
#include "zaya/model/moe_experts.h"
#include "zaya/ops/bf16_linear.h"
#include "zaya/ops/moe_dispatch.h"
#include "zaya/ops/routing.h"

namespace zaya {
namespace {

using testing::world;

enum class Routing {
  kBalanced,   // every source sends the same number of rows to every expert
  kRandom,     // random experts with skip and void choices mixed in
  kOneExpert,  // all rows to the last expert (last rank); rank 0 routes everything to skip and sends nothing
  kToRankZero  // every row to rank 0's experts: the other ranks receive nothing
};

struct Case {
  const char* name;
  Routing routing;
  int64_t top_k;
};

// The tokens of ep-group member `s`: their count and choices [T * top_k]. A
// function of (group, member, case) only, so every rank can build the tokens
// of the whole group for the reference.
struct Tokens {
  int64_t T = 0;
  std::vector<int32_t> choice_TJ;
};

Tokens make_tokens(const ZayaConfig& c, const Case& k, int group, int s, int ep_size, uint64_t case_id) {
  const int64_t E = c.experts, K = k.top_k, skip = c.skip_slot(), El = E / ep_size;
  Rng rng{31, (uint64_t(group) * 64 + uint64_t(s)) * 64 + case_id, 0};
  Tokens t;
  switch (k.routing) {
    case Routing::kBalanced: t.T = 2 * E; break;
    case Routing::kRandom: t.T = 3 + 4 * s + group % 2; break;  // differs across ranks
    case Routing::kOneExpert: t.T = 4 + s; break;
    case Routing::kToRankZero: t.T = 5 + 2 * s; break;
  }
  t.choice_TJ.assign(t.T * K, kNoExpert);
  for (int64_t i = 0; i < t.T; ++i)
    for (int64_t j = 0; j < K; ++j) {
      int32_t& ch = t.choice_TJ[i * K + j];
      switch (k.routing) {
        case Routing::kBalanced: ch = int32_t((i + s + j) % E); break;
        case Routing::kRandom:
          do {  // E + 2 outcomes: the experts, skip, void; distinct within a token like the router's top-k
            const int64_t v = int64_t(rng.next_below(uint64_t(E + 2)));
            ch = v < E ? int32_t(v) : v == E ? int32_t(skip) : kNoExpert;
          } while (j == 1 && ch != kNoExpert && ch == t.choice_TJ[i * K]);
          break;
        case Routing::kOneExpert: ch = (s == 0 || j > 0) ? int32_t(skip) : int32_t(E - 1); break;
        case Routing::kToRankZero: ch = j == 0 ? int32_t(rng.next_below(uint64_t(El))) : int32_t(skip); break;
      }
    }
  return t;
}

float x_value(int group, int s, int64_t t, int64_t d, int64_t D) {
  return normal01(41, uint64_t(group) * 64 + uint64_t(s), uint64_t(t * D + d));
}
// Gradient of the expert output of (token t, choice j).
float dy_value(int group, int s, int64_t t, int64_t j, int64_t d, int64_t K, int64_t D) {
  return normal01(43, uint64_t(group) * 64 + uint64_t(s), uint64_t((t * K + j) * D + d));
}

// One side's forward and backward: activations, scratch, plan and results.
struct ExpertRun {
  Arena arena;
  ExpertActs acts;
  ExpertScratch scratch;
  ExpertPlan plan;
  std::vector<float> dxp_MD, g_fc1, g_fc2;

  // tokens: this rank's; capacity_tokens: the most any rank of the group
  // holds (the row capacity assumes every rank has as many tokens as this
  // one). The buffers start as `fill`.
  // keep_bf16: the GEMM inputs kept as bf16 (runs under bf16 GEMMs).
  ExpertRun(const ZayaConfig& c, int64_t tokens, int64_t capacity_tokens, int64_t ep_ranks, float fill,
            bool keep_bf16 = false) {
    Arena measure = Arena::measuring();
    ExpertActs ma;
    ExpertScratch ms;
    carve_expert_acts(ma, c, capacity_tokens, ep_ranks, keep_bf16, measure);
    carve_expert_scratch(ms, c, capacity_tokens, ep_ranks, keep_bf16, measure);
    arena.reset(measure.used());
    std::fill(arena.data(), arena.data() + arena.capacity(), fill);
    carve_expert_acts(acts, c, capacity_tokens, ep_ranks, keep_bf16, arena);
    carve_expert_scratch(scratch, c, capacity_tokens, ep_ranks, keep_bf16, arena);
    plan.reserve(c.experts, tokens, c.top_k);
    dxp_MD.assign(size_t(tokens * c.top_k * c.hidden), 0.0f);
  }

  void run(const ZayaConfig& c, const MoeWeights& w, const std::vector<int32_t>& choice_TJ, int64_t T,
           const float* x_TD, const float* dy_MD, Comm* ep, const Precision& precision = {}) {
    build_expert_plan(plan, choice_TJ.data(), T, c.top_k);
    g_fc1.assign(size_t(w.expert_count * 2 * c.expert_ffn * c.hidden), 0.0f);
    g_fc2.assign(size_t(w.expert_count * c.hidden * c.expert_ffn), 0.0f);
    MoeWeights g = w;
    g.fc1_E2FD = g_fc1.data();
    g.fc2_EDF = g_fc2.data();
    experts_forward(c, precision, w, plan, x_TD, acts, scratch, ep);
    experts_backward(c, precision, w, g, acts, scratch, ep, dy_MD, dxp_MD.data());
  }
};

// ||a - b|| <= 1e-4 ||b|| + 1e-7 for n floats (the tolerance above); returns the relative difference.
double rel_diff(const float* a, const float* b, int64_t n, bool* ok) {
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = double(a[i]) - double(b[i]);
    diff += d * d;
    norm += double(b[i]) * double(b[i]);
  }
  *ok = std::sqrt(diff) <= 1e-4 * std::sqrt(norm) + 1e-7;
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

// Worst relative differences seen, for the summary line.
struct Worst {
  double rows = 0, weights = 0;
};

void check_case(const ZayaConfig& base, const Case& k, int ep_size, uint64_t case_id, Worst& worst) {
  Comm& wc = world();
  const int group = wc.rank() / ep_size;
  auto ep = wc.split(group, wc.rank() % ep_size, "ep");
  ASSERT_EQ(ep->size(), ep_size);
  const int me = ep->rank();
  ZayaConfig c = base;
  c.top_k = k.top_k;
  const int64_t D = c.hidden, F = c.expert_ffn, E = c.experts, K = c.top_k, El = E / ep_size;
  const std::string where = std::string(k.name) + ", top_k " + std::to_string(K) + ", E " + std::to_string(E) +
                            ", ep " + std::to_string(ep_size) + ", ep rank " + std::to_string(me);

  // Every expert's weights, the same on every rank.
  std::vector<float> fc1(size_t(E * 2 * F * D)), fc2(size_t(E * D * F));
  fill_normal(fc1.data(), fc1.size(), 0.0f, 0.3f, 51, case_id);
  fill_normal(fc2.data(), fc2.size(), 0.0f, 0.3f, 53, case_id);
  MoeWeights all;
  all.fc1_E2FD = fc1.data();
  all.fc2_EDF = fc2.data();
  all.expert_first = 0;
  all.expert_count = E;
  MoeWeights local = all;
  local.expert_first = me * El;
  local.expert_count = El;
  local.fc1_E2FD = fc1.data() + local.expert_first * 2 * F * D;
  local.fc2_EDF = fc2.data() + local.expert_first * D * F;

  // The group's tokens, in ep-rank order; this rank's start at first[me].
  std::vector<Tokens> tokens;
  std::vector<int64_t> first(ep_size + 1, 0);
  for (int s = 0; s < ep_size; ++s) {
    tokens.push_back(make_tokens(c, k, group, s, ep_size, case_id));
    first[s + 1] = first[s] + tokens[s].T;
  }
  const int64_t T = tokens[me].T, T_all = first[ep_size];
  int64_t T_max = 0;
  for (const Tokens& t : tokens) T_max = std::max(T_max, t.T);
  std::vector<int32_t> choice_all;
  std::vector<float> x_all(size_t(T_all * D));
  for (int s = 0; s < ep_size; ++s) {
    choice_all.insert(choice_all.end(), tokens[s].choice_TJ.begin(), tokens[s].choice_TJ.end());
    for (int64_t t = 0; t < tokens[s].T; ++t)
      for (int64_t d = 0; d < D; ++d) x_all[(first[s] + t) * D + d] = x_value(group, s, t, d, D);
  }
  const float* x_TD = x_all.data() + first[me] * D;

  // Reference: one rank, every expert, the whole group's tokens.
  ExpertRun ref(c, T_all, T_all, 1, 0.0f);
  build_expert_plan(ref.plan, choice_all.data(), T_all, K);
  std::vector<float> dy_ref(size_t(T_all * K * D), 0.0f);
  for (int s = 0; s < ep_size; ++s)
    for (int64_t t = 0; t < tokens[s].T; ++t)
      for (int64_t j = 0; j < K; ++j) {
        const int32_t row = ref.plan.choice_row[(first[s] + t) * K + j];
        if (row >= 0)
          for (int64_t d = 0; d < D; ++d) dy_ref[row * D + d] = dy_value(group, s, t, j, d, K, D);
      }
  ref.run(c, all, choice_all, T_all, x_all.data(), dy_ref.data(), nullptr);

  // Expert parallel, twice: the second run, with its buffers starting as NaN
  // (what a reused workspace holds is arbitrary), must repeat the first bit
  // for bit.
  ExpertRun got(c, T, T_max, ep_size, 0.0f), again(c, T, T_max, ep_size, std::nanf(""));
  build_expert_plan(got.plan, tokens[me].choice_TJ.data(), T, K);
  std::vector<float> dy(size_t(T * K * D), 0.0f);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < K; ++j) {
      const int32_t row = got.plan.choice_row[t * K + j];
      if (row >= 0)
        for (int64_t d = 0; d < D; ++d) dy[row * D + d] = dy_value(group, me, t, j, d, K, D);
    }
  got.run(c, local, tokens[me].choice_TJ, T, x_TD, dy.data(), ep.get());
  again.run(c, local, tokens[me].choice_TJ, T, x_TD, dy.data(), ep.get());

  // Only rows routed to real experts travel: what this rank sends is its plan,
  // what it receives is what the group routed to its experts.
  const ExpertExchange& x = got.acts.exchange;
  int64_t expect_recv = 0;
  for (int64_t i = 0; i < T_all * K; ++i)
    expect_recv += choice_all[i] >= local.expert_first && choice_all[i] < local.expert_first + El;
  EXPECT_EQ(std::accumulate(x.send_rows.begin(), x.send_rows.end(), int64_t(0)), got.plan.rows) << where;
  EXPECT_EQ(std::accumulate(x.recv_rows.begin(), x.recv_rows.end(), int64_t(0)), expect_recv) << where;
  EXPECT_EQ(x.rows, expect_recv) << where;

  // (a) y and (b) dxp of every routed row of this rank's tokens.
  int64_t routed = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < K; ++j) {
      const int32_t row = got.plan.choice_row[t * K + j];
      const int32_t want = ref.plan.choice_row[(first[me] + t) * K + j];
      ASSERT_EQ(row >= 0, want >= 0) << where;
      if (row < 0) continue;
      ++routed;
      bool ok = false;
      double r = rel_diff(got.acts.y_MD + row * D, ref.acts.y_MD + want * D, D, &ok);
      EXPECT_TRUE(ok) << "y of token " << t << " choice " << j << " (expert " << tokens[me].choice_TJ[t * K + j]
                      << "): relative difference " << r << ", " << where;
      worst.rows = std::max(worst.rows, r);
      r = rel_diff(got.dxp_MD.data() + row * D, ref.dxp_MD.data() + want * D, D, &ok);
      EXPECT_TRUE(ok) << "dxp of token " << t << " choice " << j << ": relative difference " << r << ", " << where;
      worst.rows = std::max(worst.rows, r);
    }
  EXPECT_EQ(routed, got.plan.rows) << where;

  // (b) the weight gradients of this rank's experts.
  for (int64_t e = 0; e < El; ++e) {
    const int64_t ge = local.expert_first + e;
    bool ok = false;
    double r = rel_diff(got.g_fc1.data() + e * 2 * F * D, ref.g_fc1.data() + ge * 2 * F * D, 2 * F * D, &ok);
    EXPECT_TRUE(ok) << "fc1 gradient of expert " << ge << ": relative difference " << r << ", " << where;
    worst.weights = std::max(worst.weights, r);
    r = rel_diff(got.g_fc2.data() + e * D * F, ref.g_fc2.data() + ge * D * F, D * F, &ok);
    EXPECT_TRUE(ok) << "fc2 gradient of expert " << ge << ": relative difference " << r << ", " << where;
    worst.weights = std::max(worst.weights, r);
  }

  // Determinism: the second run gives the same bits.
  const int64_t rows = got.plan.rows;
  EXPECT_EQ(0, std::memcmp(got.acts.y_MD, again.acts.y_MD, sizeof(float) * rows * D)) << "y, " << where;
  EXPECT_EQ(0, std::memcmp(got.dxp_MD.data(), again.dxp_MD.data(), sizeof(float) * rows * D)) << "dxp, " << where;
  EXPECT_EQ(0, std::memcmp(got.g_fc1.data(), again.g_fc1.data(), sizeof(float) * got.g_fc1.size()))
      << "fc1 gradient, " << where;
  EXPECT_EQ(0, std::memcmp(got.g_fc2.data(), again.g_fc2.data(), sizeof(float) * got.g_fc2.size()))
      << "fc2 gradient, " << where;

  // Under bf16 GEMMs, the same exchange with the GEMM inputs kept only as
  // bf16 (its buffers starting as NaN) gives the bits of keeping them in
  // float32: the weight gradients read the rounding they would have made.
  std::vector<float> both(fc1);
  both.insert(both.end(), fc2.begin(), fc2.end());
  std::vector<uint16_t> both_bf16(both.size());
  for (size_t i = 0; i < both.size(); ++i) both_bf16[i] = float_to_bf16(both[i]);
  const Bf16Weights bf16{both.data(), int64_t(both.size()), both_bf16.data()};
  Bf16Context context(&bf16);
  const Precision precision{&context};
  MoeWeights in_both = local;
  in_both.fc1_E2FD = both.data() + local.expert_first * 2 * F * D;
  in_both.fc2_EDF = both.data() + int64_t(fc1.size()) + local.expert_first * D * F;
  ExpertRun f32_rows(c, T, T_max, ep_size, 0.0f), bf16_rows(c, T, T_max, ep_size, std::nanf(""), true);
  build_expert_plan(f32_rows.plan, tokens[me].choice_TJ.data(), T, K);
  build_expert_plan(bf16_rows.plan, tokens[me].choice_TJ.data(), T, K);
  f32_rows.run(c, in_both, tokens[me].choice_TJ, T, x_TD, dy.data(), ep.get(), precision);
  bf16_rows.run(c, in_both, tokens[me].choice_TJ, T, x_TD, dy.data(), ep.get(), precision);
  if (rows > 0) {
    EXPECT_NE(0, std::memcmp(f32_rows.acts.y_MD, got.acts.y_MD, sizeof(float) * rows * D)) << "not bf16, " << where;
  }
  EXPECT_EQ(0, std::memcmp(f32_rows.acts.y_MD, bf16_rows.acts.y_MD, sizeof(float) * rows * D)) << "bf16 y, " << where;
  EXPECT_EQ(0, std::memcmp(f32_rows.dxp_MD.data(), bf16_rows.dxp_MD.data(), sizeof(float) * rows * D))
      << "bf16 dxp, " << where;
  EXPECT_EQ(0, std::memcmp(f32_rows.g_fc1.data(), bf16_rows.g_fc1.data(), sizeof(float) * got.g_fc1.size()))
      << "bf16 fc1 gradient, " << where;
  EXPECT_EQ(0, std::memcmp(f32_rows.g_fc2.data(), bf16_rows.g_fc2.data(), sizeof(float) * got.g_fc2.size()))
      << "bf16 fc2 gradient, " << where;
}

struct Shape {
  int64_t experts, hidden, expert_ffn;
};

TEST(ExpertParallel, ExchangeMatchesOneRankHoldingEveryExpert) {
  const Case cases[] = {
      {"balanced", Routing::kBalanced, 1},       {"balanced", Routing::kBalanced, 2},
      {"random with skip", Routing::kRandom, 1}, {"random with skip", Routing::kRandom, 2},
      {"one expert", Routing::kOneExpert, 1},    {"one expert", Routing::kOneExpert, 2},
      {"to rank 0", Routing::kToRankZero, 1},    {"to rank 0", Routing::kToRankZero, 2},
  };
  const Shape shapes[] = {{4, 32, 12}, {6, 24, 16}, {8, 16, 8}};
  const int n = world().size();
  int checked = 0;
  for (const Shape& sh : shapes) {
    ZayaConfig c;
    c.experts = sh.experts;
    c.hidden = sh.hidden;
    c.expert_ffn = sh.expert_ffn;
    c.use_skip = true;
    for (int ep = 2; ep <= n; ++ep) {
      if (n % ep != 0 || c.experts % ep != 0) continue;
      Worst worst;
      uint64_t id = 0;
      for (const Case& k : cases) check_case(c, k, ep, id++, worst);
      ++checked;
      if (world().rank() == 0)
        std::printf("E %lld, ep %d: worst relative difference rows %.2e, weight gradients %.2e\n", (long long)c.experts,
                    ep, worst.rows, worst.weights);
    }
  }
  EXPECT_GT(checked, 0) << "no ep size divides both the world (" << n << ") and an expert count";
}

}  // namespace
}  // namespace zaya
