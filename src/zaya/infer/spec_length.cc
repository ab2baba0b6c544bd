#include "zaya/infer/spec_length.h"

#include <algorithm>
#include <cmath>

#include "zaya/core/error.h"
#include "zaya/infer/infer_model.h"

namespace zaya {

DraftCost DraftCost::flat(int64_t max_tokens) {
  return {std::vector<double>(size_t(std::max<int64_t>(max_tokens, 0) + 1), 1.0), 0.0};
}

namespace {
// Weight bytes a step over n positions of one sequence reads: the dense
// weights and the LM head once, and per MoE layer the experts the n rows
// route to (top_k each, independently and evenly over E: E (1 - (1 - top_k / E)^n)).
double step_bytes(const InferModel& m, int64_t n) {
  const WeightBytes& b = m.weight_bytes();
  const ZayaConfig& c = m.config();
  double experts = 0;
  if (c.experts > 0 && b.per_expert > 0) {
    const double E = double(c.experts), pick = std::min(1.0, double(c.top_k) / E);
    experts = E * (1.0 - std::pow(1.0 - pick, double(n)));
  }
  return double(b.dense + b.lm_head) + double(c.num_blocks) * experts * double(b.per_expert);
}
}  // namespace

DraftCost draft_cost(const InferModel& target, const InferModel* draft, int64_t max_tokens) {
  const double plain = step_bytes(target, 1);
  ZAYA_ASSERT(plain > 0);
  DraftCost cost;
  for (int64_t k = 0; k <= max_tokens; ++k) cost.check.push_back(step_bytes(target, k + 1) / plain);
  if (draft != nullptr) cost.draft_token = step_bytes(*draft, 1) / plain;
  return cost;
}

DraftLength::DraftLength(int64_t max_tokens, bool adaptive)
    : DraftLength(max_tokens, adaptive, DraftCost::flat(max_tokens)) {}

DraftLength::DraftLength(int64_t max_tokens, bool adaptive, const DraftCost& cost)
    : max_(max_tokens), k_(max_tokens), adaptive_(adaptive) {
  ZAYA_CHECK_USAGE(max_tokens >= 1 && max_tokens <= 64, "--spec-tokens {} is invalid; allowed: 1..64", max_tokens);
  ZAYA_ASSERT(int64_t(cost.check.size()) > max_tokens);
  for (int64_t k = 0; k <= max_tokens; ++k) cost_.push_back(cost.check[size_t(k)] + double(k) * cost.draft_token);
  if (!adaptive_) return;
  k_ = best(acceptance());
  if (k_ == 0) {  // no draft pays even at the prior: probe after a pause
    k_ = 1;
    paused_ = pause_;
    probing_ = true;
  }
}

double DraftLength::gain(int64_t k, double a) const {
  double tokens = 0, p = 1;  // 1 + a + ... + a^k: the kept tokens and the one after them
  for (int64_t i = 0; i <= k; ++i, p *= a) tokens += p;
  return tokens / cost_[size_t(k)];
}

int64_t DraftLength::best(double a) const {
  int64_t k = 0;
  double g = 0;
  for (int64_t i = 1; i <= max_; ++i)
    if (const double gi = gain(i, a); gi > g) k = i, g = gi;
  return g >= kMinGain ? k : 0;
}

void DraftLength::skipped() {
  if (paused_ > 0 && --paused_ == 0) k_ = 1;  // the probe
}

void DraftLength::record(int64_t drafted, int64_t accepted) {
  if (!adaptive_ || drafted <= 0) return;
  for (int64_t i = 0; i < drafted && i <= accepted; ++i) {
    kept_ = kDecay * kept_ + (i < accepted ? 1.0 : 0.0);
    seen_ = kDecay * seen_ + 1.0;
  }
  const int64_t k = best(acceptance());
  if (k > 0) {
    k_ = k;
    pause_ = kPause;
    probing_ = false;
    return;
  }
  // Drafting does not pay: pause, longer after each probe that kept nothing.
  if (probing_) pause_ = accepted > 0 ? kPause : std::min(kMaxPause, 2 * pause_);
  paused_ = pause_;
  probing_ = true;
  k_ = 1;
}

}  // namespace zaya
