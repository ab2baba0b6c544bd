// Speculative decoding (spec_draft.h, spec_length.h, spec_verify.h,
// spec_decode.h): n-gram drafts (and their match length); the adaptive length
// priced in bytes (expected tokens, the two-state plan, simulated sources: the
// floor at low acceptance, the good rows kept, runs; pauses, probes, evidence
// apart, determinism); the rejection rule's tokens follow the
// target distribution (chi-square, fixed seeds) for point-mass and sampled
// drafts under temperature / top-k / top-p, on synthetic rows and on a model;
// greedy speculative generation equals plain greedy generation token for token
// (prompts, batch sizes, K, adaptive or not, f32 / bf16 / int8 weights, stop
// ids inside an accepted run); the scheduler plans a proposed draft.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "zaya/infer/batch_scheduler.h"
#include "zaya/infer/generator.h"
#include "zaya/infer/spec_decode.h"
#include "zaya/infer/spec_draft.h"
#include "zaya/infer/spec_length.h"
#include "zaya/infer/spec_verify.h"
#include "zaya/infer/test_util.h"

namespace zaya {
namespace {

using testing::chi_square;
using testing::chi_square_999;
using testing::random_tokens;
using testing::repetitive_requests;

TEST(SpecDraft, NgramLooksUpTheLongestMostRecentMatch) {
  std::vector<int32_t> out;
  const std::vector<int32_t> ctx = {1, 2, 3, 9, 2, 3, 7, 8, 1, 2, 3};
  EXPECT_EQ(ngram_draft(ctx, 3, {}, out), 3);
  EXPECT_EQ(out, (std::vector<int32_t>{9, 2, 3}));  // "1 2 3" at 0 (the longest n), followed by 9 2 3
  EXPECT_EQ(ngram_draft(ctx, 10, {.max_ngram = 2, .min_ngram = 1}, out), 2);
  // "2 3" most recently at 4: 7 8 1 2 3 up to the end, then the copy of itself (the text repeats every 5)
  EXPECT_EQ(out, (std::vector<int32_t>{7, 8, 1, 2, 3, 7, 8, 1, 2, 3}));
  EXPECT_EQ(ngram_draft(std::vector<int32_t>{5, 6, 7}, 4, {}, out), 0);
  EXPECT_TRUE(out.empty());
  ngram_draft(ctx, 0, {}, out);
  EXPECT_TRUE(out.empty());
  ngram_draft(std::vector<int32_t>{4, 4, 4, 4}, 8, {}, out);
  EXPECT_EQ(out, (std::vector<int32_t>(8, 4)));  // "4 4 4" at 0, one token before the end, and so on
  // The longest match wins over a more recent shorter one: "1 2 3" at 0 over "2 3" at 5.
  EXPECT_EQ(ngram_draft(std::vector<int32_t>{1, 2, 3, 5, 0, 2, 3, 6, 1, 2, 3}, 2, {}, out), 3);
  EXPECT_EQ(out, (std::vector<int32_t>{5, 0}));
  // Matches up to max_ngram (16): the length of the match is the draft's evidence.
  std::vector<int32_t> twice = random_tokens(40, 1000, 7);
  twice.insert(twice.end(), twice.begin(), twice.begin() + 20);
  EXPECT_EQ(ngram_draft(twice, 4, {}, out), 16);
  EXPECT_EQ(out, (std::vector<int32_t>(twice.begin() + 20, twice.begin() + 24)));
  EXPECT_EQ(ngram_draft(twice, 4, {.max_ngram = 20}, out), 20);
}

// A check's cost on an MoE model like the trained `small` (docs/inference.md):
// 45% of a plain step's bytes dense (and the LM head), the rest one of 8
// experts per layer, E (1 - (1 - 1/E)^(k + 1)) experts read by a check of k.
DraftCost moe_cost(int64_t max_tokens, double draft_token) {
  DraftCost c;
  for (int64_t k = 0; k <= max_tokens; ++k) c.check.push_back(0.45 + 0.55 * 8 * (1 - std::pow(7.0 / 8.0, k + 1)));
  c.draft_token = draft_token;
  return c;
}

// Tokens per unit of cost of `steps` steps of one sequence under the policy
// (cost: `cost`), when its drafted tokens are kept as a two-state source says:
// a draft's first token with probability `first` after a rejection (or a step
// without a draft), `next` after a kept token (later tokens, and the first one
// after a check kept whole); fixed seeds.
double simulate(const DraftCost& cost, int64_t max_tokens, bool adaptive, double first, double next,
                int64_t steps = 4000) {
  DraftLength d(max_tokens, adaptive, cost);
  Rng rng{11, 3, 0};
  double tokens = 0, spent = 0;
  bool run = false;
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t k = d.next();
    if (k == 0) {
      d.skipped();
      tokens += 1, spent += 1, run = false;
      continue;
    }
    int64_t kept = 0;
    for (double p = run ? next : first; kept < k && rng.next_double() < p; p = next) ++kept;
    d.record(k, kept);
    run = kept == k;
    tokens += double(kept + 1), spent += cost.check[size_t(k)] + double(k) * cost.draft_token;
  }
  return tokens / spent;
}

TEST(SpecDraft, AdaptiveLengthExpectedTokens) {
  DraftLength flat(8);
  EXPECT_DOUBLE_EQ(DraftLength::tokens(0, 0.5, 0.8), 1.0);
  EXPECT_DOUBLE_EQ(DraftLength::tokens(2, 0.5, 0.8), 1 + 0.5 + 0.5 * 0.8);
  EXPECT_DOUBLE_EQ(flat.gain(2, 0.5, 0.8), 1.9);  // free checks
  // Independent acceptance (p1 = p): the chain's long-run rate is one check's gain.
  DraftLength moe(8, true, moe_cost(8, 0.05));
  for (int64_t k = 1; k <= 8; ++k) EXPECT_NEAR(moe.rate(k, k, 0.7, 0.7), moe.gain(k, 0.7, 0.7), 1e-12);
  // Runs: a short check after a rejection pays for the long kept runs it leads into, where a single check
  // after a rejection would not.
  EXPECT_LT(moe.gain(1, 0.3, 0.95), 1.0);
  const DraftLength::Plan runs = moe.plan(0.3, 0.95);
  EXPECT_GE(runs.after_rejection, 1);
  EXPECT_LT(runs.after_rejection, runs.in_run);
  EXPECT_EQ(runs.in_run, 8);
  EXPECT_GT(runs.rate, 1.4);
  // Poor acceptance on an expensive check: nothing after a rejection.
  EXPECT_EQ(moe.plan(0.3, 0.3).after_rejection, 0);
  EXPECT_EQ(DraftLength(8).plan(0.3, 0.3).after_rejection, 8);  // free checks: any acceptance pays
}

TEST(SpecDraft, AdaptiveLengthKeepsTheFloorAndTheGoodRows) {
  // On the MoE cost (about 1.5 steps for a check of one token, 3.7 for eight):
  // sampled text, where a draft model's tokens are kept 30% of the time and
  // n-gram ones 6%: within 3% of plain decoding, where a fixed K loses half.
  const DraftCost model = moe_cost(8, 0.05), ngram = moe_cost(8, 0.0);
  EXPECT_GT(simulate(model, 8, true, 0.3, 0.3), 0.97);
  EXPECT_LT(simulate(model, 8, false, 0.3, 0.3), 0.5);
  EXPECT_GT(simulate(ngram, 8, true, 0.06, 0.06), 0.97);
  // Good rows: as fast as always drafting K (within 3%) where every token is likely kept.
  for (double a : {0.92, 0.96}) {
    EXPECT_GT(simulate(model, 8, true, a, a), 0.97 * simulate(model, 8, false, a, a)) << a;
    EXPECT_GT(simulate(ngram, 8, true, a, a), 0.97 * simulate(ngram, 8, false, a, a)) << a;
  }
  // Runs (a quotation copied, then left): faster than a fixed K, and than plain decoding by far.
  const double runs = simulate(ngram, 8, true, 0.3, 0.95);
  EXPECT_GT(runs, 1.4);
  EXPECT_GT(runs, 1.1 * simulate(ngram, 8, false, 0.3, 0.95));
}

TEST(SpecDraft, AdaptiveLengthPausesProbesAndTellsEvidenceApart) {
  // Low acceptance with an expensive check: a pause, then a one-token probe;
  // a probe after which drafting still does not pay doubles the pause.
  DraftLength low(8, true, moe_cost(8, 0.05));
  EXPECT_GT(low.next(), 0);  // the prior drafts
  for (int i = 0; i < 8 && low.next() > 0; ++i) low.record(low.next(), 0);
  EXPECT_EQ(low.next(), 0);
  for (int i = 0; i < DraftLength::kPause - 1; ++i) low.skipped();
  EXPECT_EQ(low.next(), 0);
  low.skipped();
  EXPECT_EQ(low.next(), 1);  // the probe
  low.record(1, 0);
  EXPECT_EQ(low.next(), 0);
  for (int i = 0; i < 2 * DraftLength::kPause - 1; ++i) low.skipped();
  EXPECT_EQ(low.next(), 0);
  low.skipped();
  EXPECT_EQ(low.next(), 1);
  low.record(1, 1);  // kept: drafting pays now (the pause starts over), the next draft continues the run
  EXPECT_GT(low.first(), 0.3);
  EXPECT_GT(low.next(), 0);
  low.record(low.next(), 0);  // rejected: no draft after a rejection pays any more, a probe after kPause
  EXPECT_EQ(low.next(), 0);
  for (int i = 0; i < DraftLength::kPause - 1; ++i) low.skipped();
  EXPECT_EQ(low.next(), 0);
  low.skipped();
  EXPECT_EQ(low.next(), 1);
  // Text that turns predictable: drafts kept whole (each followed by a step without one) lift the
  // first-token estimate until drafting after a rejection pays again.
  int steps = 0;
  for (; steps < 1000; ++steps) {
    const int64_t k = low.next();
    if (k == 0) {
      low.skipped();
      continue;
    }
    low.record(k, k);
    low.skipped();  // a step without a draft: the next draft starts afresh, not in the run
    if (low.next() > 0) break;
  }
  EXPECT_LT(steps, 1000);
  EXPECT_GT(low.first(), 0.5);
  // Evidence apart: n-gram drafts from 1-token matches rejected, from 3-token matches kept.
  DraftLength ng(8, true, moe_cost(8, 0.0));
  for (int i = 0; i < 12; ++i) {
    ng.record(1, 0, 1);
    ng.skipped();
    ng.record(2, 2, 3);
    ng.skipped();  // each draft starts after a rejection or a step without one
  }
  EXPECT_LT(ng.first(1), 0.1);
  EXPECT_GT(ng.first(3), 0.9);
  EXPECT_GT(ng.next(3), 1);
  EXPECT_LT(ng.next(1), ng.next(3));
  // Runs apart per evidence: drafts from 16-token matches kept whole, from 2-token matches kept for one token
  // only; each class's run estimate is its own (and the pool's too).
  AcceptancePool run_pool;
  DraftLength runs(8, true, moe_cost(8, 0.0), &run_pool);
  for (int i = 0; i < 12; ++i) {
    runs.record(8, 8, 16);
    runs.skipped();
    runs.record(8, 1, 2);
    runs.skipped();
  }
  EXPECT_GT(runs.later(16), 0.9);
  EXPECT_LT(runs.later(2), 0.2);
  EXPECT_GT(run_pool.later(16), 0.9);
  EXPECT_LT(run_pool.later(2), 0.2);
  EXPECT_EQ(runs.next(16), 8);
  EXPECT_LT(runs.next(2), runs.next(16));
  // Deterministic: the same outcomes give the same lengths.
  DraftLength a(6, true, moe_cost(6, 0.02)), b(6, true, moe_cost(6, 0.02));
  for (int i = 0; i < 200; ++i) {
    const int64_t k = a.next(i % 4), kept = (i * 7919) % 5 < 3 ? k : k / 2;
    ASSERT_EQ(k, b.next(i % 4));
    if (k == 0) {
      a.skipped();
      b.skipped();
    } else {
      a.record(k, kept, i % 4);
      b.record(k, kept, i % 4);
    }
  }
  // Adaptive off: always the maximum.
  DraftLength fixed(5, false, moe_cost(5, 0.05));
  for (int i = 0; i < 10; ++i) fixed.record(5, 0);
  EXPECT_EQ(fixed.next(), 5);
  testing::expect_error([] { DraftLength(0); }, "--spec-tokens 0");
  testing::expect_error([] { parse_spec_method("lookahead"); }, "allowed: none, ngram");
}

TEST(SpecDraft, AcceptancePoolSharesWhatEachSequenceLearns) {
  // Two sequences of one engine at an expensive check: the first one's rejections lower the second one's
  // estimates before it has drafted at all, so it starts paused where a sequence on its own would draft.
  AcceptancePool pool;
  DraftLength a(8, true, moe_cost(8, 0.05), &pool), b(8, true, moe_cost(8, 0.05), &pool);
  DraftLength alone(8, true, moe_cost(8, 0.05));
  EXPECT_DOUBLE_EQ(b.first(), alone.first());  // the pool's prior is the fixed one until something is checked
  EXPECT_DOUBLE_EQ(b.later(), alone.later());
  ASSERT_GT(b.next(), 0);
  ASSERT_GT(alone.next(), 0);
  for (int i = 0; i < 6; ++i) {
    a.record(1, 0);
    a.skipped();
  }
  EXPECT_LT(pool.first(), 0.2);
  EXPECT_LT(b.first(), 0.2);
  // b learnt from a: paused, and its first probe waits the pool's pause (a's one-token drafts once nothing paid
  // were probes that failed: they doubled it).
  EXPECT_EQ(b.next(), 0);
  EXPECT_GT(pool.pause(), DraftLength::kPause);
  EXPECT_EQ(b.pause(), pool.pause());
  for (int64_t i = 0; i < pool.pause() - 1; ++i) b.skipped();
  EXPECT_EQ(b.next(), 0);
  b.skipped();
  EXPECT_EQ(b.next(), 1);
  EXPECT_GT(alone.next(), 0);  // a sequence on its own still drafts
  EXPECT_DOUBLE_EQ(alone.first(), 0.5);
  // Per evidence: a's rejections were of drafts without evidence; n-gram matches of 3 keep their prior.
  EXPECT_DOUBLE_EQ(b.first(3), 0.5);
  // A sequence's own outcomes take over within a few checks: b's drafts kept whole (each after a step
  // without one) lift its first-token estimate above the pool's, which a's rejections keep low.
  for (int i = 0; i < 6; ++i) {
    b.record(2, 2);
    b.skipped();
    a.record(1, 0);
    a.skipped();
  }
  EXPECT_GT(b.first(), 0.6);
  EXPECT_LT(a.first(), 0.3);
  EXPECT_GT(b.first(), pool.first());
}

// The probe pause is the pool's: where every probe fails (sampled text, an
// expensive check), sequence after sequence of one engine (batch 1) probes
// less. The first waits kPause, then 2, 4, 8 kPause (as every sequence did
// when the pause was its own); the later ones wait the pause the pool has
// grown to. A probe
// that pays starts the pool's pause over, and a new sequence probes soon.
TEST(SpecDraft, AcceptancePoolLearnsThePause) {
  const DraftCost cost = moe_cost(8, 0.05);
  AcceptancePool pool;
  for (int i = 0; i < 6; ++i) pool.record(false, 1, 0, 0);  // rejected drafts: the pool says nothing pays
  ASSERT_EQ(pool.pause(), DraftLength::kPause);             // no probe yet
  // One sequence's steps (160), every probe rejected: its probes and the step of its first.
  auto run = [&](DraftLength& d, int64_t& first) {
    int64_t probes = 0;
    first = -1;
    for (int64_t step = 0; step < 160; ++step) {
      const int64_t k = d.next();
      if (k == 0) {
        d.skipped();
        continue;
      }
      EXPECT_EQ(k, 1);  // nothing pays: only probes
      EXPECT_TRUE(d.probing());
      if (first < 0) first = step;
      ++probes;
      d.record(1, 0);
    }
    return probes;
  };
  std::vector<int64_t> probes;
  for (int seq = 0; seq < 4; ++seq) {
    DraftLength d(8, true, cost, &pool);
    const int64_t pause = pool.pause();
    int64_t first = 0;
    probes.push_back(run(d, first));
    EXPECT_EQ(first, pause) << "sequence " << seq;  // its first probe waits the pool's pause
    EXPECT_EQ(pool.pause(), DraftLength::kMaxPause) << "sequence " << seq;
  }
  EXPECT_EQ(probes, (std::vector<int64_t>{4, 1, 1, 1}));  // probes after 8, 16, 32, 64 idle steps, then 128
  // The text turns predictable: a sequence's probes are kept until one pays, which starts the pool's pause over.
  DraftLength e(8, true, cost, &pool);
  int64_t kept = 0;
  for (int64_t step = 0; step < 2000 && pool.pause() == DraftLength::kMaxPause; ++step) {
    const int64_t k = e.next();
    if (k == 0) {
      e.skipped();
      continue;
    }
    EXPECT_EQ(k, 1);
    e.record(1, 1);
    e.skipped();
    ++kept;
  }
  EXPECT_EQ(pool.pause(), DraftLength::kPause);
  EXPECT_GE(kept, 1);
  EXPECT_GT(e.next(), 0);  // drafting after a rejection pays for it now
  // A new sequence waits the pool's pause (kPause) at most before it drafts.
  DraftLength f(8, true, cost, &pool);
  int64_t idle = 0;
  for (; idle < DraftLength::kPause && f.next() == 0; ++idle) f.skipped();
  EXPECT_GT(f.next(), 0);
  // Where drafting pays, a new sequence drafts at once, whatever the pause.
  AcceptancePool paying;
  for (int i = 0; i < 6; ++i) paying.record(false, 4, 4, 0);
  for (int i = 0; i < 5; ++i) paying.probed(false);
  ASSERT_EQ(paying.pause(), DraftLength::kMaxPause);
  DraftLength g(8, true, cost, &paying);
  EXPECT_GT(g.next(), 0);
  EXPECT_FALSE(g.probing());
}

TEST(SpecDraft, CostFromTheModelsBytes) {
  auto model = testing::random_model(testing::small_test_config(), 3);
  auto im = InferModel::from_model(*model);
  const DraftCost ngram = draft_cost(*im, nullptr, 6), self = draft_cost(*im, im.get(), 6);
  ASSERT_EQ(ngram.check.size(), 7u);
  EXPECT_DOUBLE_EQ(ngram.check[0], 1.0);
  for (size_t k = 1; k < ngram.check.size(); ++k) {
    EXPECT_GT(ngram.check[k], ngram.check[k - 1]);  // more rows, more experts read
    EXPECT_LT(ngram.check[k], double(k + 1));       // the dense weights and the head once
  }
  const WeightBytes& b = im->weight_bytes();
  const double E = double(im->config().experts),
               all_experts = double(b.dense + b.lm_head) + double(im->config().num_blocks) * E * double(b.per_expert);
  EXPECT_LT(ngram.check[6], all_experts / double(b.dense + b.lm_head + im->config().num_blocks * b.per_expert));
  EXPECT_EQ(ngram.draft_token, 0.0);
  EXPECT_DOUBLE_EQ(self.draft_token, 1.0);  // a draft as large as the target: one plain step per token
  EXPECT_EQ(self.check, ngram.check);
}

TEST(SpecDraft, RoutingSpreadScalesTheExtraExperts) {
  auto model = testing::random_model(testing::small_test_config(), 3);
  auto im = InferModel::from_model(*model);
  const ZayaConfig& c = im->config();
  ASSERT_GT(c.experts, 1);
  // No spread (rows always on one expert): a check reads what a plain step does; full spread: the independent
  // estimate; half: in between.
  const DraftCost none = draft_cost(*im, nullptr, 4, 0.0), half = draft_cost(*im, nullptr, 4, 0.5),
                  full = draft_cost(*im, nullptr, 4);
  for (size_t k = 1; k <= 4; ++k) {
    EXPECT_DOUBLE_EQ(none.check[k], 1.0);
    EXPECT_GT(half.check[k], 1.0);
    EXPECT_NEAR(half.check[k] - 1.0, 0.5 * (full.check[k] - 1.0), 1e-12);
  }
  // Measured on steps of 2 .. max_rows rows: each layer reads top_k experts in every step here (spread 0).
  RoutingSpread spread(c, 5);
  EXPECT_DOUBLE_EQ(spread.value(), 1.0);
  const int64_t layers = c.num_blocks, top = std::min(c.top_k, c.experts);
  for (int i = 0; i < 50; ++i) spread.observe({.tokens = 4, .expert_loads = layers * top});
  EXPECT_LT(spread.value(), 0.1);
  const double v = spread.value();
  spread.observe({.tokens = 1, .expert_loads = layers * c.experts});   // one row: no extra experts possible
  spread.observe({.tokens = 64, .expert_loads = layers * c.experts});  // a prompt chunk: not a decode step
  EXPECT_DOUBLE_EQ(spread.value(), v);
  // Every row on its own expert: more than independent routing predicts.
  RoutingSpread apart(c, 5);
  for (int i = 0; i < 50; ++i)
    apart.observe({.tokens = 4, .expert_loads = layers * std::min<int64_t>(c.experts, 4 * top)});
  EXPECT_GT(apart.value(), 1.0);
  // New prices keep a sequence's estimates: cheap checks draft where dear ones do not.
  DraftLength d(4, true, full);
  for (int i = 0; i < 50 && d.next() > 0; ++i) d.record(d.next(), 0);
  ASSERT_EQ(d.next(), 0);
  d.set_cost(none);
  EXPECT_GT(d.next(), 0);
}

// Three rows over 7 ids (one padding id beyond real_vocab 6); drafts of two
// tokens, point masses or drawn from a draft distribution q. The first emitted
// token must follow p0, and the second (emitted when d1 was kept) p1.
TEST(SpecVerify, RejectionSamplingFollowsTheTargetDistribution) {
  const int64_t V = 7, real = 6, N = 20000;
  const float rows[3 * 7] = {1.0f, 0.2f,  2.0f, -1.0f, 0.5f, 1.5f, 9.0f,  //
                             0.1f, -0.3f, 0.0f, 2.5f,  1.0f, 0.4f, 9.0f,  //
                             3.0f, 0.0f,  1.0f, 0.5f,  0.2f, 2.0f, 9.0f};
  const float q_rows[2 * 7] = {0.1f, 0.1f, 0.1f, 0.4f, 0.2f, 0.1f, 0.0f,  //
                               0.3f, 0.3f, 0.1f, 0.1f, 0.1f, 0.1f, 0.0f};
  std::vector<SamplingOptions> settings(4);
  settings[0] = {.temperature = 1.0, .top_k = 0, .top_p = 1.0};
  settings[1] = {.temperature = 0.7, .top_k = 4, .top_p = 1.0};
  settings[2] = {.temperature = 1.3, .top_k = 0, .top_p = 0.8};
  settings[3] = {.temperature = 0.9, .top_k = 5, .top_p = 0.9};
  SamplingScratch scratch;
  std::vector<std::pair<float, int32_t>> p0, p1;
  for (size_t si = 0; si < settings.size(); ++si)
    for (bool point_mass : {true, false}) {
      const SamplingOptions& o = settings[si];
      sampling_distribution(rows, real, o, p0);
      sampling_distribution(rows + V, real, o, p1);
      std::map<int32_t, int64_t> first, second;
      int64_t seconds = 0;
      Rng rng = sampling_rng(1234 + si);
      for (int64_t t = 0; t < N; ++t) {
        int32_t draft[2] = {2, 3};
        if (!point_mass)
          for (int i = 0; i < 2; ++i) {  // d_i ~ q_i
            double u = rng.next_double();
            int32_t v = 0;
            while (v < real - 1 && (u -= q_rows[i * V + v]) > 0) ++v;
            draft[i] = v;
          }
        const DraftVerdict r = verify_draft(rows, V, real, draft, point_mass ? nullptr : q_rows, o, rng, scratch);
        ASSERT_GE(r.accepted, 0);
        ASSERT_LE(r.accepted, 2);
        const int32_t t0 = r.accepted >= 1 ? draft[0] : r.next;
        ++first[t0];
        if (r.accepted >= 1) {
          ++second[r.accepted >= 2 ? draft[1] : r.next];
          ++seconds;
        }
      }
      int64_t dof = 0;
      const double c0 = chi_square(first, p0, N, dof);
      EXPECT_LT(c0, chi_square_999(dof)) << "first token, setting " << si << " point mass " << point_mass;
      const double c1 = chi_square(second, p1, seconds, dof);
      EXPECT_GT(seconds, N / 20);
      EXPECT_LT(c1, chi_square_999(dof)) << "second token, setting " << si << " point mass " << point_mass;
    }
  // A greedy row keeps the draft while it is the argmax and draws nothing.
  Rng rng = sampling_rng(1);
  const int32_t greedy_draft[2] = {2, 3};
  const DraftVerdict g = verify_draft(rows, V, real, greedy_draft, nullptr, {.temperature = 0}, rng, scratch);
  EXPECT_EQ(g.accepted, 2);
  EXPECT_EQ(g.next, 0);
  EXPECT_EQ(rng.counter, 0u);
}

// On a model: three tokens after a prompt whose n-gram drafts the next ones,
// sampled over 3 ids; their joint frequencies against the model's p(t1) p(t2|t1) p(t3|t1 t2).
TEST(SpecVerify, SpeculativeSamplingOnAModelFollowsItsDistribution) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 47);
  auto im = InferModel::from_model(*model);
  GeneratorOptions go;
  go.max_batch = 16;
  go.spec.method = SpecMethod::kNgram;
  go.spec.tokens = 2;
  go.spec.adaptive = false;
  const GenerationStats st = testing::expect_three_tokens_follow_the_model(
      *im, go, {0, 1, 2, 0, 1, 2, 0, 1, 2, 0}, {.temperature = 1.5, .top_k = 0, .top_p = 1.0}, 3, 2000);
  EXPECT_GT(st.spec.drafts, 1000);
}

// --spec-tokens not given (0) is the method's default K: a run without it drafts
// exactly as one with the default given; the stats time the drafting inside the
// decode steps (none without a drafter).
TEST(SpecDecode, DefaultKPerMethodAndDraftTime) {
  SpecOptions o;
  o.method = SpecMethod::kNgram;
  EXPECT_EQ(o.max_tokens(), kSpecTokensNgram);
  o.method = SpecMethod::kModel;
  EXPECT_EQ(o.max_tokens(), kSpecTokensModel);
  o.tokens = 3;
  EXPECT_EQ(o.max_tokens(), 3);
  o.method = SpecMethod::kNgram;
  o.tokens = 65;
  testing::expect_error([&] { o.validate(); }, "--spec-tokens 65");
  o.tokens = -1;
  testing::expect_error([&] { o.validate(); }, "--spec-tokens -1");

  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 45);
  auto im = InferModel::from_model(*model);
  const std::vector<GenerationRequest> reqs = repetitive_requests(c, 6, 70);
  GeneratorOptions go;
  go.max_batch = 3;
  GenerationStats plain_st, default_st, given_st, four_st;
  const auto plain = generate(*im, reqs, go, {}, {}, &plain_st);
  EXPECT_EQ(plain_st.draft_seconds, 0.0);
  go.spec.method = SpecMethod::kNgram;
  go.spec.adaptive = false;  // every draft as long as K allows: the K in use shows in the counts
  const auto by_default = generate(*im, reqs, go, {}, {}, &default_st);
  go.spec.tokens = kSpecTokensNgram;
  const auto given = generate(*im, reqs, go, {}, {}, &given_st);
  go.spec.tokens = 4;
  const auto four = generate(*im, reqs, go, {}, {}, &four_st);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(by_default[i].tokens, plain[i].tokens) << i;
    EXPECT_EQ(given[i].tokens, plain[i].tokens) << i;
  }
  EXPECT_EQ(default_st.spec.drafts, given_st.spec.drafts);
  EXPECT_EQ(default_st.spec.drafted, given_st.spec.drafted);
  EXPECT_EQ(default_st.spec.accepted, given_st.spec.accepted);
  // K 8's drafts are longer than K 4's.
  ASSERT_GT(four_st.spec.drafts, 0);
  EXPECT_GT(double(default_st.spec.drafted) / double(default_st.spec.drafts),
            double(four_st.spec.drafted) / double(four_st.spec.drafts));
  EXPECT_GT(default_st.draft_seconds, 0.0);
  EXPECT_LE(default_st.draft_seconds, default_st.decode_seconds);
}

// Greedy speculative generation is plain greedy generation. Each step of both
// is decode-only (every request of a batch starts in the first step), so every
// row runs the decode kernels: the same bits, the same argmax.
TEST(SpecDecode, GreedyEqualsPlainGreedyTokenForToken) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 44);
  SpecCounts seen;
  // Misleading prompts: P, the model's first two greedy tokens after P, a wrong third, P again. The
  // continuation of P' looks up the earlier P and its tokens: drafts that are partly right.
  auto misleading = [&](std::vector<GenerationRequest> reqs) {
    auto f32 = InferModel::from_model(*model);
    const auto first = generate(*f32, reqs, GeneratorOptions{});
    for (size_t i = 1; i < reqs.size(); i += 2) {
      const std::vector<int32_t> p = reqs[i].prompt;
      const std::vector<int32_t>& g = first[i].tokens;
      reqs[i].prompt.insert(reqs[i].prompt.end(), {g[0], g[1], int32_t((g[2] + 1) % c.real_vocab_size)});
      reqs[i].prompt.insert(reqs[i].prompt.end(), p.begin(), p.end());
    }
    return reqs;
  };
  for (const char* dtype : {"f32", "bf16", "int8"}) {
    auto im = std::string(dtype) == "f32" ? InferModel::from_model(*model) : InferModel::from_model(*model, dtype);
    for (int64_t batch : {1, 3, 5}) {
      // Batch 1: eight requests one after another; larger batches: one request per slot.
      std::vector<GenerationRequest> reqs =
          misleading(repetitive_requests(c, batch == 1 ? 8 : batch, 50 + uint64_t(batch)));
      GeneratorOptions plain;
      plain.max_batch = batch;
      const auto ref = generate(*im, reqs, plain);
      // A stop id met late in one request's plain output: it must end inside a run there too.
      reqs[0].stop_ids = {ref[0].tokens[12]};
      const auto ref_stop = generate(*im, reqs, plain);
      SpecOptions ngram;
      ngram.method = SpecMethod::kNgram;
      testing::expect_speculative_greedy_equals(*im, reqs, plain, ngram, ref_stop, seen,
                                                std::string(dtype) + " batch " + std::to_string(batch));
    }
  }
  // Both ways out of a draft happened: tokens kept and tokens rejected.
  EXPECT_GT(seen.accepted, 0);
  EXPECT_GT(seen.drafted, seen.accepted);
}

TEST(BatchScheduler, ProposedDraftBecomesASpeculativeChunk) {
  SchedulerOptions so;
  so.slots = 2;
  so.step_tokens = 6;
  BatchScheduler sched(so);
  GenerationRequest a, b;
  a.prompt = {1, 2};
  a.max_new_tokens = 4;
  b.prompt = {3};
  b.max_new_tokens = 10;
  sched.start(0, a, {});
  sched.start(1, b, {});
  sched.plan();
  sched.advance();
  EXPECT_FALSE(sched.accept(0, 7, 2, 100));
  EXPECT_FALSE(sched.accept(1, 8, 1, 100));
  ASSERT_TRUE(sched.decoding(0) && sched.decoding(1));
  const std::vector<int32_t> da = {9, 9, 9, 9}, db = {5, 6, 7, 8};
  sched.propose(0, da);
  sched.propose(1, db);
  const std::vector<StepChunk>& plan = sched.plan();
  ASSERT_EQ(plan.size(), 2u);
  // Slot 0 has 3 tokens left: a draft of 2 (3 emitted at most); slot 1 the rest of the budget (6 - 2 - 2).
  EXPECT_TRUE(plan[0].speculative);
  EXPECT_EQ(plan[0].count, 3);
  EXPECT_EQ(plan[0].tokens[0], 7);
  EXPECT_EQ(plan[0].logits, LogitsWanted::kAll);
  EXPECT_EQ(plan[1].count, 3);
  EXPECT_EQ((std::vector<int32_t>(plan[1].tokens, plan[1].tokens + 3)), (std::vector<int32_t>{8, 5, 6}));
  sched.advance();
  // The draft is forgotten after one plan.
  const std::vector<StepChunk>& next = sched.plan();
  EXPECT_FALSE(next[0].speculative);
  EXPECT_EQ(next[0].count, 1);
}

}  // namespace
}  // namespace zaya
