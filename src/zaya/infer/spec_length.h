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
//   if the rows choose independently and evenly), and draft_token, the
//   drafter's per drafted token (a draft model's one-token step; an n-gram
//   lookup: 0).
// - DraftLength: one sequence's policy. It keeps an estimate a of the
//   per-token acceptance (an exponential average over the drafted tokens
//   checked: kept ones count 1, the first rejected one 0; kDecay per token;
//   it starts at kPriorAcceptance with the weight of kPriorTokens tokens) and
//   drafts the k in 1..max that maximises the expected tokens per unit of
//   cost, (1 - a^(k+1)) / (1 - a) / (check[k] + k draft_token), as long as
//   that beats plain decoding (1 token per unit) by kMinGain; else it stops
//   drafting for a pause of kPause steps, then probes with one token (the
//   cheapest check; its outcome updates a). A probe after which drafting
//   still does not pay doubles the pause (up to kMaxPause) if nothing was
//   accepted, else starts the next pause at kPause; one after which it pays
//   resumes drafting. Adaptive off: always the maximum.

#include <cstdint>
#include <vector>

namespace zaya {

class InferModel;

struct DraftCost {
  std::vector<double> check;  // [k]: a check of k drafted tokens (k = 0: a plain step, 1)
  double draft_token = 0;     // the drafter's per drafted token
  // A dense model's checks and a free drafter: check[k] = 1 (tests, and no model at hand).
  static DraftCost flat(int64_t max_tokens);
};

// The cost of checks of up to max_tokens drafted tokens on `target`, drafted
// by `draft` (a draft model; null: an n-gram lookup, free), from their weight
// bytes (InferModel::weight_bytes) and routing (experts, top_k).
DraftCost draft_cost(const InferModel& target, const InferModel* draft, int64_t max_tokens);

class DraftLength {
 public:
  static constexpr double kDecay = 0.9;            // per drafted token checked
  static constexpr double kPriorAcceptance = 0.8;  // before any check
  static constexpr double kPriorTokens = 4;        // its weight, in tokens
  static constexpr double kMinGain = 1.1;          // expected speed-up a draft must promise
  static constexpr int64_t kPause = 8;             // steps without a draft before a probe
  static constexpr int64_t kMaxPause = 128;

  // max_tokens: the most tokens one draft may hold (--spec-tokens); adaptive
  // off: always max_tokens; cost: check[] covers 0..max_tokens (default: flat).
  explicit DraftLength(int64_t max_tokens = 4, bool adaptive = true);
  DraftLength(int64_t max_tokens, bool adaptive, const DraftCost& cost);
  // Tokens to draft at the next step (0: none).
  int64_t next() const { return paused_ > 0 ? 0 : k_; }
  // A step without a draft (paused, or nothing to propose).
  void skipped();
  // A checked draft of `drafted` tokens of which the first `accepted` were kept.
  void record(int64_t drafted, int64_t accepted);

  // The acceptance estimate, and the expected speed-up over plain decoding of a draft of k tokens at acceptance a.
  double acceptance() const { return kept_ / seen_; }
  double gain(int64_t k, double a) const;
  // The best k for acceptance a (0: no draft beats plain decoding by kMinGain).
  int64_t best(double a) const;

 private:
  std::vector<double> cost_;  // [k]: check[k] + k draft_token
  int64_t max_, k_;
  bool adaptive_;
  double kept_ = kPriorAcceptance * kPriorTokens, seen_ = kPriorTokens;
  int64_t paused_ = 0, pause_ = kPause;
  bool probing_ = false;  // the next draft is a probe after a pause
};

}  // namespace zaya
