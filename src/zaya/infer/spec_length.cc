#include "zaya/infer/spec_length.h"

#include <algorithm>
#include <cmath>

#include "zaya/core/error.h"
#include "zaya/infer/engine.h"
#include "zaya/infer/infer_model.h"

namespace zaya {

DraftCost DraftCost::flat(int64_t max_tokens) {
  return {std::vector<double>(size_t(std::max<int64_t>(max_tokens, 0) + 1), 1.0), 0.0};
}

namespace {
// Experts one MoE layer reads for n rows choosing top_k each, independently and evenly over E.
double independent_experts(double E, double top_k, double n) {
  return E * (1.0 - std::pow(1.0 - std::min(1.0, top_k / E), n));
}

// Weight bytes a step over n positions of one sequence reads: the dense
// weights and the LM head once, and per MoE layer the experts the n rows
// route to (top_k, plus `spread` times the independent estimate's extra ones).
double step_bytes(const InferModel& m, int64_t n, double spread) {
  const WeightBytes& b = m.weight_bytes();
  const ZayaConfig& c = m.config();
  double experts = 0;
  if (c.experts > 0 && b.per_expert > 0) {
    const double E = double(c.experts), k = std::min(E, double(c.top_k));
    experts = k + spread * (independent_experts(E, k, double(n)) - k);
  }
  return double(b.dense + b.lm_head) + double(c.num_blocks) * experts * double(b.per_expert);
}
}  // namespace

DraftCost draft_cost(const InferModel& target, const InferModel* draft, int64_t max_tokens, double spread) {
  const double plain = step_bytes(target, 1, spread);
  ZAYA_ASSERT(plain > 0);
  DraftCost cost;
  for (int64_t k = 0; k <= max_tokens; ++k) cost.check.push_back(step_bytes(target, k + 1, spread) / plain);
  if (draft != nullptr) cost.draft_token = step_bytes(*draft, 1, 1.0) / plain;
  return cost;
}

RoutingSpread::RoutingSpread(const ZayaConfig& c, int64_t max_rows)
    : experts_(double(c.experts)),
      top_k_(std::min(double(c.experts), double(c.top_k))),
      layers_(double(c.num_blocks)),
      max_rows_(max_rows) {}

void RoutingSpread::observe(const StepStats& step) {
  if (experts_ <= 0 || step.tokens < 2 || step.tokens > max_rows_) return;
  observed_ += std::max(0.0, double(step.expert_loads) - layers_ * top_k_);
  independent_ += layers_ * (independent_experts(experts_, top_k_, double(step.tokens)) - top_k_);
}

DraftLength::DraftLength(int64_t max_tokens, bool adaptive)
    : DraftLength(max_tokens, adaptive, DraftCost::flat(max_tokens)) {}

DraftLength::DraftLength(int64_t max_tokens, bool adaptive, const DraftCost& cost)
    : max_(max_tokens), adaptive_(adaptive) {
  ZAYA_CHECK_USAGE(max_tokens >= 1 && max_tokens <= 64, "--spec-tokens {} is invalid; allowed: 1..64", max_tokens);
  set_cost(cost);
  first_.fill({kPriorFirst * kPriorTokens, kPriorTokens});
  next_.fill({kPriorNext * kPriorTokens, kPriorTokens});
}

DraftLength::DraftLength(int64_t max_tokens, bool adaptive, const DraftCost& cost, AcceptancePool* pool)
    : DraftLength(max_tokens, adaptive, cost) {
  pool_ = pool;
  if (pool_ == nullptr) return;
  first_.fill({0, 0});  // the sequence's own outcomes only; the prior is the pool's (value_over)
  next_.fill({0, 0});
  idle_ = 0;  // where the pool says nothing pays, the first probe waits the pool's pause like any other
}

int64_t DraftLength::pause() const { return pool_ != nullptr ? pool_->pause() : pause_; }

double DraftLength::first(int64_t evidence) const {
  const Estimate& e = first_[size_t(evidence_class(evidence))];
  return pool_ != nullptr ? e.value_over(pool_->first(evidence)) : e.value();
}

double DraftLength::later(int64_t evidence) const {
  const Estimate& e = next_[size_t(evidence_class(evidence))];
  return pool_ != nullptr ? e.value_over(pool_->later(evidence)) : e.value();
}

void DraftLength::set_cost(const DraftCost& cost) {
  ZAYA_ASSERT(int64_t(cost.check.size()) > max_);
  cost_.clear();
  for (int64_t k = 0; k <= max_; ++k) cost_.push_back(cost.check[size_t(k)] + double(k) * cost.draft_token);
}

void DraftLength::learn(Estimate& head, Estimate& next, int64_t drafted, int64_t accepted) {
  head.add(accepted > 0);
  for (int64_t i = 1; i < drafted && i <= accepted; ++i) next.add(i < accepted);
}

void DraftLength::Estimate::add(bool ok) {
  kept = kDecay * kept + (ok ? 1.0 : 0.0);
  seen = kDecay * seen + 1.0;
}

int64_t DraftLength::evidence_class(int64_t evidence) {
  if (evidence <= 3) return std::max<int64_t>(evidence, 0);  // none (a draft model), n-gram matches of 1, 2, 3
  return evidence < 8 ? 4 : evidence < 16 ? 5 : 6;           // 4-7, 8-15, 16 and more
}

double DraftLength::tokens(int64_t k, double p1, double p) {
  double tokens = 1, run = p1;  // the token after the kept ones, plus p1 (1 + p + ... + p^(k-1))
  for (int64_t i = 0; i < k; ++i, run *= p) tokens += run;
  return tokens;
}

double DraftLength::gain(int64_t k, double p1, double p) const { return tokens(k, p1, p) / cost_[size_t(k)]; }

namespace {
// The two-state chain's long-run rate (DraftLength::rate) from its parts: q_r and q_a, the chances that a check
// after a rejection / in a run is kept whole; t_r, t_a their expected tokens; c_r, c_a their costs.
double chain_rate(double q_r, double q_a, double t_r, double t_a, double c_r, double c_a) {
  // Stationary share of the run state A: q_R / (1 - q_A + q_R).
  const double den = 1 - q_a + q_r, in_run = den > 0 ? q_r / den : 1.0;
  return ((1 - in_run) * t_r + in_run * t_a) / ((1 - in_run) * c_r + in_run * c_a);
}
}  // namespace

double DraftLength::rate(int64_t kr, int64_t ka, double p1, double p) const {
  ZAYA_ASSERT(kr >= 1 && ka >= 1);
  // Two states: R (after a rejection, the first token kept with p1) and A (in a run, with p); a check of k
  // kept whole goes to A, any other to R.
  return chain_rate(p1 * std::pow(p, double(kr - 1)), std::pow(p, double(ka)), tokens(kr, p1, p), tokens(ka, p, p),
                    cost_[size_t(kr)], cost_[size_t(ka)]);
}

DraftLength::Plan DraftLength::plan(double p1, double p) const {
  // Every pair's rate from per-length tables (the same values rate() computes, O(K) pow and sums instead of
  // O(K^2)): it runs for every decoding sequence at every step, drafting or not.
  std::array<double, 65> pow_p{}, t_r{}, t_a{};  // max_ <= 64 (the constructor)
  double run_r = p1, run_a = p;                  // tokens()'s sums, one term more per length (the same operations)
  t_r[0] = t_a[0] = 1;
  pow_p[0] = std::pow(p, 0.0);
  for (int64_t k = 1; k <= max_; ++k, run_r *= p, run_a *= p) {
    pow_p[size_t(k)] = std::pow(p, double(k));
    t_r[size_t(k)] = t_r[size_t(k - 1)] + run_r;
    t_a[size_t(k)] = t_a[size_t(k - 1)] + run_a;
  }
  Plan best;
  for (int64_t kr = 1; kr <= max_; ++kr)
    for (int64_t ka = 1; ka <= max_; ++ka)
      if (const double r = chain_rate(p1 * pow_p[size_t(kr - 1)], pow_p[size_t(ka)], t_r[size_t(kr)], t_a[size_t(ka)],
                                      cost_[size_t(kr)], cost_[size_t(ka)]);
          r > best.rate)
        best = {kr, ka, r};
  if (best.rate >= kMinGain) return best;
  // Drafting after a rejection does not pay; inside a run (rarely reached then) the best single check, if any pays.
  best = {0, 0, 1.0};
  for (int64_t k = 1; k <= max_; ++k)
    if (const double g = t_a[size_t(k)] / cost_[size_t(k)]; g >= kMinGain && g > best.rate)
      best.in_run = k, best.rate = g;
  return best;
}

DraftLength::Choice DraftLength::choose(int64_t evidence) const {
  if (!adaptive_) return {max_, false};
  const Plan pl = plan(first(evidence), later(evidence));
  const int64_t k = run_ ? pl.in_run : pl.after_rejection;
  if (k > 0) return {k, false};
  return {idle_ >= pause() ? 1 : 0, true};
}

void DraftLength::skipped() {
  ++idle_;
  run_ = false;  // a token came without a draft: the next draft starts afresh
}

void DraftLength::record(int64_t drafted, int64_t accepted, int64_t evidence) {
  if (!adaptive_ || drafted <= 0) return;
  const bool probe = choose(evidence).probe;
  if (pool_ != nullptr) pool_->record(run_, drafted, accepted, evidence);
  const size_t c = size_t(evidence_class(evidence));
  learn(run_ ? next_[c] : first_[c], next_[c], drafted, accepted);
  run_ = accepted == drafted;
  idle_ = 0;
  // A probe after which drafting after a rejection still does not pay: a longer pause before the next one (the
  // pool's, for all of its sequences); one after which it pays starts the pause over.
  if (!probe) return;
  const bool pays = plan(first(evidence), later(evidence)).after_rejection > 0;
  if (pool_ != nullptr)
    pool_->probed(pays);
  else
    pause_ = pays ? kPause : std::min(kMaxPause, 2 * pause_);
}

AcceptancePool::AcceptancePool() {
  first_.fill({DraftLength::kPriorFirst * DraftLength::kPriorTokens, DraftLength::kPriorTokens});
  next_.fill({DraftLength::kPriorNext * DraftLength::kPriorTokens, DraftLength::kPriorTokens});
}

void AcceptancePool::probed(bool pays) {
  pause_ = pays ? DraftLength::kPause : std::min(DraftLength::kMaxPause, 2 * pause_);
}

void AcceptancePool::record(bool in_run, int64_t drafted, int64_t accepted, int64_t evidence) {
  if (drafted <= 0) return;
  ++checks_;
  const size_t c = size_t(DraftLength::evidence_class(evidence));
  DraftLength::learn(in_run ? next_[c] : first_[c], next_[c], drafted, accepted);
}

}  // namespace zaya
