// Speculative decoding (spec_draft.h, spec_length.h, spec_verify.h,
// spec_decode.h): n-gram drafts and the adaptive length priced in bytes; the rejection rule's tokens follow the
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
  ngram_draft(ctx, 3, {}, out);
  EXPECT_EQ(out, (std::vector<int32_t>{9, 2, 3}));  // "1 2 3" at 0 (the longest n), followed by 9 2 3
  ngram_draft(ctx, 10, {.max_ngram = 2, .min_ngram = 1}, out);
  EXPECT_EQ(out, (std::vector<int32_t>{7, 8, 1, 2, 3}));  // "2 3" most recently at 4, up to the end
  ngram_draft(std::vector<int32_t>{5, 6, 7}, 4, {}, out);
  EXPECT_TRUE(out.empty());
  ngram_draft(ctx, 0, {}, out);
  EXPECT_TRUE(out.empty());
  ngram_draft(std::vector<int32_t>{4, 4, 4, 4}, 8, {}, out);
  EXPECT_EQ(out, (std::vector<int32_t>{4}));  // "4 4 4" at 0, one token before the end
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

// `n` checked drafts of `k` tokens at a steady acceptance of kept / k per token.
void feed(DraftLength& d, int n, int64_t k, int64_t kept) {
  for (int i = 0; i < n; ++i) d.record(k, kept);
}

TEST(SpecDraft, AdaptiveLengthIsPricedByBytes) {
  // Free checks (a dense model, check[k] = 1): any acceptance above ~10% pays; full acceptance drafts the most.
  DraftLength flat(8);
  EXPECT_EQ(flat.next(), 8);
  feed(flat, 20, 8, 2);
  EXPECT_EQ(flat.next(), 8);
  // High acceptance drafts longer than middling acceptance on the MoE cost.
  DraftLength high(8, true, moe_cost(8, 0.0)), mid(8, true, moe_cost(8, 0.0));
  feed(high, 10, 4, 4);
  feed(mid, 10, 4, 3);  // 3 kept, the 4th rejected: 75% per token
  EXPECT_EQ(high.next(), 8);
  EXPECT_GT(mid.next(), 0);
  EXPECT_LT(mid.next(), high.next());
  EXPECT_GT(high.gain(8, high.acceptance()), mid.gain(mid.next(), mid.acceptance()));
  // Acceptance about 70%: free n-gram drafts still pay, a draft model's (15% of a step per token) do not.
  DraftLength ngram(4, true, moe_cost(4, 0.0)), model(4, true, moe_cost(4, 0.15));
  feed(ngram, 20, 4, 3);  // 3 kept, the 4th rejected
  feed(model, 20, 4, 3);
  EXPECT_NEAR(ngram.acceptance(), 0.71, 0.01);
  EXPECT_NEAR(ngram.acceptance(), model.acceptance(), 1e-12);
  EXPECT_GT(ngram.next(), 0);
  EXPECT_EQ(model.next(), 0);
  EXPECT_EQ(ngram.best(0.5), 0);   // below about 60% nothing pays on this model
  EXPECT_EQ(model.best(0.95), 4);  // a draft model pays at high acceptance
  // Low acceptance with an expensive check: a pause, then a one-token probe;
  // a failed probe doubles the pause, an accepted one that leaves the estimate low starts it over.
  DraftLength low(8, true, moe_cost(8, 0.05));
  EXPECT_GT(low.next(), 0);  // the prior (80%) drafts
  for (int i = 0; i < 4 && low.next() > 0; ++i) low.record(low.next(), 1);
  EXPECT_EQ(low.next(), 0);
  for (int i = 0; i < DraftLength::kPause - 1; ++i) low.skipped();
  EXPECT_EQ(low.next(), 0);
  low.skipped();
  EXPECT_EQ(low.next(), 1);
  low.record(1, 0);
  EXPECT_EQ(low.next(), 0);
  for (int i = 0; i < 2 * DraftLength::kPause - 1; ++i) low.skipped();
  EXPECT_EQ(low.next(), 0);
  low.skipped();
  EXPECT_EQ(low.next(), 1);
  low.record(1, 1);  // kept, but 1 token does not lift the estimate enough
  EXPECT_EQ(low.next(), 0);
  for (int i = 0; i < DraftLength::kPause; ++i) low.skipped();
  EXPECT_EQ(low.next(), 1);
  // Text that turns predictable: accepted probes lift the estimate until drafting resumes.
  int probes = 0;
  while (low.next() <= 1 && probes < 20) {
    if (low.next() == 0) {
      low.skipped();
      continue;
    }
    low.record(1, 1);
    ++probes;
  }
  EXPECT_LT(probes, 20);
  EXPECT_GT(low.next(), 1);
  // Deterministic: the same outcomes give the same lengths.
  DraftLength a(6, true, moe_cost(6, 0.02)), b(6, true, moe_cost(6, 0.02));
  for (int i = 0; i < 200; ++i) {
    const int64_t k = a.next(), kept = (i * 7919) % 5 < 3 ? k : k / 2;
    ASSERT_EQ(k, b.next());
    if (k == 0) {
      a.skipped();
      b.skipped();
    } else {
      a.record(k, kept);
      b.record(k, kept);
    }
  }
  // Adaptive off: always the maximum.
  DraftLength fixed(5, false, moe_cost(5, 0.05));
  feed(fixed, 10, 5, 0);
  EXPECT_EQ(fixed.next(), 5);
  testing::expect_error([] { DraftLength(0); }, "--spec-tokens 0");
  testing::expect_error([] { parse_spec_method("lookahead"); }, "allowed: none, ngram");
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
  std::vector<std::pair<float, int32_t>> scratch, p0, p1;
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
