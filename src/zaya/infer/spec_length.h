#pragma once
// The adaptive draft length of speculative decoding (docs/inference.md,
// "Speculative decoding", "Adaptive K"): how many tokens a sequence drafts at
// its next step, priced in weight bytes read (never in wall-clock time, so a
// sampled text stays the same for a seed).
//
// - DraftCost: what a step costs in units of a plain one-token step of the
//   target at batch 1 (decoding there reads the weights, docs/inference.md,
//   "Performance"): check[k], a check of k drafted tokens (k + 1 positions:
//   the dense weights and the LM head once, and in each MoE layer the
//   experts its rows route to, E (1 - (1 - top_k / E)^(k + 1)) in expectation
//   if the rows choose independently and evenly; trained routers are uneven,
//   so the experts beyond top_k are scaled by a measured `spread`,
//   RoutingSpread), and draft_token, the drafter's per drafted token (a draft
//   model's one-token step; an n-gram lookup: 0).
// - RoutingSpread: the experts steps of a few rows really read beyond top_k
//   per layer, over what independent even routing predicts for them
//   (StepStats::expert_loads; steps of 2 .. max_rows rows: decode batches and
//   checks). It depends on the tokens only (no clock), so drafting stays
//   reproducible for `zaya generate`; in `zaya serve` it also depends on the
//   other requests in the batch.
// - DraftLength: one sequence's policy, run-aware. Acceptance comes in runs
//   (a quoted passage is copied for a while, then the text departs from it),
//   so it keeps two kinds of estimate (exponential averages over the drafted
//   tokens checked, kDecay per token, from a prior of kPriorTokens tokens):
//   `first[e]`, the chance that a draft's first token is kept when the last
//   check ended in a rejection (or there was none), and `next[e]`, the chance
//   that a token is kept when the token before it was (later tokens of a
//   draft, and the first one after a fully kept check), both per evidence e
//   of the draft (an n-gram draft's match length in classes 1, 2, 3, 4-7,
//   8-15, 16+: a 16-token match of quoted code goes on being copied far
//   longer than a 2-token one; a draft model's: 0). A draft of k tokens
//   whose first token is kept with p1 then yields
//   1 + p1 (1 + p + ... + p^(k-1)) tokens in expectation (p = next[e]) for
//   cost[k] = check[k] + k draft_token, and is kept whole (the next check is
//   in a run) with p1 p^(k-1). The policy is a two-state chain (after a
//   rejection: p1 = first[e]; in a run: p1 = next): it drafts the pair of
//   lengths (after a rejection, in a run) with the most tokens per unit of
//   cost in the long run (the chain's stationary mix of the two), so a short
//   check after a rejection is worth its price when it leads into long kept
//   runs; when no pair beats plain decoding (1 token per unit) by kMinGain it
//   drafts nothing after a rejection (in a run: the single check with the best
//   gain, if one pays). While nothing pays it probes: after `pause` steps
//   without a draft it drafts one token (the cheapest check; its outcome
//   updates the estimates). A probe after which drafting after a rejection
//   still does not pay doubles the pause (kPause up to kMaxPause); one after
//   which it pays starts it over.
//   The first draft of a sequence is such a probe unless the prior pays.
//   Adaptive off: always the maximum.
// - AcceptancePool: the same estimates learnt from every sequence of one
//   engine (Speculator). A DraftLength given a pool takes its prior from it:
//   each estimate is (kept + kPriorTokens x the pool's) / (seen +
//   kPriorTokens) over the sequence's own outcomes, so a new sequence starts
//   from what the others found (sampled text rejects n-gram drafts for all of
//   them alike) and, at batch B, the first rejections of B sequences teach
//   each other at once, while a sequence's own outcomes take over within a few
//   checks; where the pool says nothing pays, a new sequence waits a pause
//   before its first probe. The pause is the pool's too: every probe of
//   every sequence doubles it (up to kMaxPause) when drafting after a
//   rejection still does not pay, and starts it over at kPause when it does,
//   and each sequence of the pool waits the pool's pause. So where drafting
//   does not pay (sampled text) the probes per sequence fall as the pool
//   learns: the first sequence probes after kPause, 2, 4, 8 kPause idle
//   steps, the later ones wait kMaxPause (bench/spec_decode.sh, sampled text,
//   n-gram, batch 1: 13 drafts over 16 sequences of 128 tokens, 70 when each
//   started its own pause at kPause; a sequence shorter than kMaxPause then
//   never probes); and one probe that pays lets every sequence probe soon.
//   (An n-gram lookup probes only where it finds a match: a sequence without
//   one has nothing to probe with, and its pause runs on.) Where drafting
//   pays the pause is never consulted: a new sequence drafts at once. It
//   depends on the tokens only: `zaya generate` stays reproducible for a
//   seed; in `zaya serve` it also depends on the other requests.

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace zaya {

class InferModel;
struct StepStats;
struct ZayaConfig;

struct DraftCost {
  std::vector<double> check;  // [k]: a check of k drafted tokens (k = 0: a plain step, 1)
  double draft_token = 0;     // the drafter's per drafted token
  // A dense model's checks and a free drafter: check[k] = 1 (tests, and no model at hand).
  static DraftCost flat(int64_t max_tokens);
};

// The cost of checks of up to max_tokens drafted tokens on `target`, drafted
// by `draft` (a draft model; null: an n-gram lookup, free), from their weight
// bytes (InferModel::weight_bytes) and routing (experts, top_k; the experts
// beyond top_k scaled by `spread`).
DraftCost draft_cost(const InferModel& target, const InferModel* draft, int64_t max_tokens, double spread = 1.0);

class RoutingSpread {
 public:
  static constexpr double kPriorRows = 8;  // the prior (spread 1) weighs as much as 8 layer-steps of extra experts
  RoutingSpread(const ZayaConfig& target, int64_t max_rows);
  // A step of the target (its last_stats); ignored outside 2 .. max_rows rows.
  void observe(const StepStats& step);
  double value() const { return (observed_ + kPriorRows) / (independent_ + kPriorRows); }

 private:
  double experts_, top_k_, layers_;
  int64_t max_rows_;
  double observed_ = 0, independent_ = 0;  // extra experts (beyond top_k) summed over layers and steps
};

class AcceptancePool;

class DraftLength {
 public:
  static constexpr double kDecay = 0.97;      // per drafted token checked
  static constexpr double kPriorFirst = 0.5;  // first[e] before any check
  static constexpr double kPriorNext = 0.8;   // next before any check
  static constexpr double kPriorTokens = 2;   // their weight, in tokens
  static constexpr double kMinGain = 1.05;    // expected speed-up a draft must promise
  static constexpr int64_t kPause = 8;        // steps without a draft before a probe
  static constexpr int64_t kMaxPause = 128;
  // Evidence classes: 0 (a draft model), n-gram match lengths 1, 2, 3, 4-7, 8-15, 16+ (a long match of code or a
  // quotation is kept far more often than a 3-token one).
  static constexpr int64_t kEvidence = 7;

  // max_tokens: the most tokens one draft may hold (--spec-tokens); adaptive
  // off: always max_tokens; cost: check[] covers 0..max_tokens (default: flat).
  explicit DraftLength(int64_t max_tokens = 4, bool adaptive = true);
  DraftLength(int64_t max_tokens, bool adaptive, const DraftCost& cost);
  // With a pool: the priors come from it, and every checked draft is recorded in it too (the pool must outlive this).
  DraftLength(int64_t max_tokens, bool adaptive, const DraftCost& cost, AcceptancePool* pool);
  // New prices (check[] covers 0..max_tokens); the estimates stay.
  void set_cost(const DraftCost& cost);
  // Tokens to draft at the next step with this evidence (0: none; 1 after a pause: a probe).
  int64_t next(int64_t evidence = 0) const { return choose(evidence).tokens; }
  // Nothing pays: next() is 0 or a one-token probe. `patient`: kMaxPause steps or more without a draft.
  bool probing(int64_t evidence = 0) const { return choose(evidence).probe; }
  bool patient() const { return idle_ >= kMaxPause; }
  // Steps without a draft before the next probe (the pool's, when given).
  int64_t pause() const;
  // A step without a draft (none chosen, or nothing to propose).
  void skipped();
  // A checked draft of `drafted` tokens with that evidence, of which the first `accepted` were kept.
  void record(int64_t drafted, int64_t accepted, int64_t evidence = 0);

  // The estimates (per evidence class): a first token kept after a rejection, and a token kept after a kept one.
  double first(int64_t evidence = 0) const;
  double later(int64_t evidence = 0) const;
  // Expected tokens of a check of k (first token kept with p1, later ones with p), and per unit of its cost.
  static double tokens(int64_t k, double p1, double p);
  double gain(int64_t k, double p1, double p) const;
  // Long-run tokens per unit of cost drafting kr tokens after a rejection and ka inside a run.
  double rate(int64_t kr, int64_t ka, double p1, double p) const;
  struct Plan {
    int64_t after_rejection = 0, in_run = 0;  // 0: no draft
    double rate = 0;                          // its expected speed-up over plain decoding
  };
  // The lengths with the best rate when it beats plain decoding by kMinGain; else none after a rejection
  // and, in a run, the single check with the best gain if that does.
  Plan plan(double p1, double p) const;

 private:
  struct Estimate {  // an exponential average of kept (1) / rejected (0) outcomes
    double kept, seen;
    double value() const { return kept / seen; }
    // Over a prior of kPriorTokens tokens at `prior` (a pool's estimate).
    double value_over(double prior) const { return (kept + kPriorTokens * prior) / (seen + kPriorTokens); }
    void add(bool ok);
  };
  static int64_t evidence_class(int64_t evidence);
  // One checked draft's outcomes: its first token into `head` (first or next), the later ones into `next`.
  static void learn(Estimate& head, Estimate& next, int64_t drafted, int64_t accepted);
  friend class AcceptancePool;
  struct Choice {
    int64_t tokens;
    bool probe;  // nothing pays: none, or 1 token after the pause
  };
  Choice choose(int64_t evidence) const;

  std::vector<double> cost_;  // [k]: check[k] + k draft_token
  int64_t max_;
  bool adaptive_;
  std::array<Estimate, kEvidence> first_;
  std::array<Estimate, kEvidence> next_;  // filled with the prior by the constructor
  bool run_ = false;                      // the last check was kept whole: the next draft continues a run
  int64_t idle_ = kPause;                 // steps since the last draft (the first draft is a probe)
  int64_t pause_ = kPause;                // idle steps before a probe (without a pool; with one: the pool's)
  AcceptancePool* pool_ = nullptr;        // the priors and the pause, when given (the estimates then start empty)
};

// The acceptance estimates of every sequence of one engine (DraftLength's
// first and next, learnt from all of their checks), the priors of the
// DraftLengths given it; and their probe pause, learnt from all of their
// probes.
class AcceptancePool {
 public:
  AcceptancePool();
  double first(int64_t evidence = 0) const {
    return first_[std::size_t(DraftLength::evidence_class(evidence))].value();
  }
  double later(int64_t evidence = 0) const { return next_[std::size_t(DraftLength::evidence_class(evidence))].value(); }
  // A checked draft of one of the sequences (in_run: it continued a kept one; as DraftLength::record).
  void record(bool in_run, int64_t drafted, int64_t accepted, int64_t evidence);
  // Drafts recorded (0: the estimates are the fixed prior, nothing learnt).
  int64_t checks() const { return checks_; }
  // Idle steps before a probe, for every sequence of the pool (DraftLength::kPause .. kMaxPause).
  int64_t pause() const { return pause_; }
  // A probe of one of the sequences, after which drafting after a rejection pays (the pause starts over) or
  // not (it doubles).
  void probed(bool pays);

 private:
  std::array<DraftLength::Estimate, DraftLength::kEvidence> first_;
  std::array<DraftLength::Estimate, DraftLength::kEvidence> next_;
  int64_t checks_ = 0;
  int64_t pause_ = DraftLength::kPause;
};

}  // namespace zaya
