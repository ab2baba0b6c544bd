#include "zaya/infer/spec_decode.h"

#include "zaya/core/enum_names.h"
#include "zaya/core/error.h"
#include "zaya/infer/batch_scheduler.h"
#include "zaya/infer/spec_model.h"
#include "zaya/infer/spec_verify.h"

namespace zaya {

int64_t SpecOptions::max_tokens() const {
  if (tokens != 0) return tokens;
  return method == SpecMethod::kModel ? kSpecTokensModel : kSpecTokensNgram;
}

void SpecOptions::validate() const {
  ZAYA_CHECK_USAGE(tokens >= 0 && tokens <= 64, "--spec-tokens {} is invalid; allowed: 1..64 (0: the method's default)",
                   tokens);
  ZAYA_CHECK_USAGE(ngram.min_ngram >= 1 && ngram.max_ngram >= ngram.min_ngram && ngram.max_ngram <= 64,
                   "n-gram sizes {}..{} are invalid; allowed: 1 <= min <= max <= 64", ngram.min_ngram, ngram.max_ngram);
  ZAYA_CHECK_USAGE(method != SpecMethod::kModel || draft_model != nullptr,
                   "--spec model needs the draft model: --spec-model DIR");
}

namespace {
constexpr EnumName<SpecMethod> kSpecMethodNames[] = {
    {SpecMethod::kNone, "none"}, {SpecMethod::kNgram, "ngram"}, {SpecMethod::kModel, "model"}};
// The draft model's draws: a stream of the sequence's seed apart from its sampling stream (sampling_rng).
constexpr uint64_t kDraftStream = 0x5bec;
}  // namespace

SpecMethod parse_spec_method(const std::string& name) {
  const SpecMethod* m = enum_find<SpecMethod>(kSpecMethodNames, name);
  ZAYA_CHECK_USAGE(m != nullptr, "--spec {} is invalid; allowed: {}", name, enum_allowed<SpecMethod>(kSpecMethodNames));
  return *m;
}

const char* spec_method_name(SpecMethod m) { return enum_name<SpecMethod>(kSpecMethodNames, m); }

namespace {
// The options with K resolved (SpecOptions::max_tokens): the Speculator reads options_.tokens as K.
SpecOptions resolved(SpecOptions o) {
  o.validate();
  o.tokens = o.max_tokens();
  return o;
}
}  // namespace

Speculator::Speculator(const SpecOptions& given, const InferenceEngine& target, int64_t sample_vocab)
    : options_(resolved(given)),
      spread_(target.config(), options_.tokens + 1),
      target_model_(&target.model()),
      slots_(size_t(target.max_sequences())) {
  const SpecOptions& o = options_;
  cost_ = draft_cost(target.model(), o.method == SpecMethod::kModel ? o.draft_model : nullptr, o.tokens);
  if (o.method == SpecMethod::kNgram) drafter_ = std::make_unique<NgramDrafter>(o.ngram);
  if (o.method == SpecMethod::kModel) drafter_ = std::make_unique<ModelDrafter>(*o.draft_model, target, sample_vocab);
  for (Slot& s : slots_) s.length = DraftLength(o.tokens, o.adaptive, cost_, &pool_);
}

Speculator::~Speculator() = default;

void Speculator::start(int32_t slot, std::span<const int32_t> prompt, const SamplingOptions& sampling, bool drafts) {
  Slot& s = slots_[size_t(slot)];
  s.drafts = drafts;
  s.context.assign(prompt.begin(), prompt.end());
  s.length = DraftLength(options_.tokens, options_.adaptive, cost_, &pool_);
  s.counts = {};
  s.sampling = sampling;
  s.draft_rng = Rng{sampling.seed, kDraftStream, 0};
  if (drafter_) drafter_->start(slot);
}

void Speculator::propose(BatchScheduler& sched, const InferenceEngine& target) {
  jobs_.clear();
  const bool lookup = drafter_ && drafter_->costless();
  for (int32_t slot = 0; slot < int32_t(slots_.size()); ++slot) {
    if (!sched.decoding(slot)) continue;
    Slot& s = slots_[size_t(slot)];
    s.draft.clear();
    s.evidence = 0;
    if (!s.drafts) continue;
    // A free drafter looks up the longest draft, priced by its evidence below; a model drafts what pays.
    int64_t k = std::min(lookup ? options_.tokens : s.length.next(), target.draft_room(slot));
    // A draft model's first draft of a sequence catches up with its whole prompt first (a prefill of the draft
    // model, 3.5% of a run of 528-token prompts): a probe where the pool has learnt that nothing pays does not
    // buy that, unless the sequence has gone kMaxPause steps without a draft (the pool learns again).
    if (!lookup && k > 0 && s.counts.drafts == 0 && pool_.checks() > 0 && s.length.probing() && !s.length.patient())
      k = 0;
    if (k <= 0) {
      s.length.skipped();
      continue;
    }
    jobs_.push_back({slot, s.context, k, &s.sampling, &s.draft_rng, &s.draft, &s.q, &s.evidence});
  }
  if (jobs_.empty()) return;
  drafter_->draft(jobs_);
  for (const DraftJob& j : jobs_) {
    Slot& s = slots_[size_t(j.slot)];
    if (lookup && !s.draft.empty())
      s.draft.resize(size_t(std::min(int64_t(s.draft.size()), s.length.next(s.evidence))));
    if (s.draft.empty())
      s.length.skipped();
    else
      sched.propose(j.slot, s.draft);
  }
}

void Speculator::reprice(const InferenceEngine& engine, Slot& s) {
  if (!options_.adaptive || drafter_ == nullptr) return;
  // New prices only when the step moved the spread (a one-token step, or one of more than K + 1 rows, leaves it,
  // and the prices with it): a step without drafts computes none.
  const double spread = spread_.value();
  spread_.observe(engine.last_stats());  // once per chunk of the step: the steps weigh by their chunks
  if (spread_.value() != spread)
    cost_ = draft_cost(*target_model_, options_.method == SpecMethod::kModel ? options_.draft_model : nullptr,
                       options_.tokens, spread_.value());
  s.length.set_cost(cost_);  // every decoding sequence has a chunk in every step: each takes the latest prices
}

const std::vector<int32_t>& Speculator::tokens(InferenceEngine& engine, const StepChunk& ch, const float* rows,
                                               int64_t V, int64_t real_vocab, const SamplingOptions& sampling,
                                               Rng& rng) {
  Slot& s = slots_[size_t(ch.slot)];
  out_.clear();
  if (!ch.speculative) {
    // A plain row (a decode token or a prompt's last): as plain decoding samples it.
    out_.push_back(sample_token(rows, real_vocab, sampling, rng, scratch_));
    if (ch.count == 1) reprice(engine, s);
  } else {
    const std::span<const int32_t> draft(ch.tokens + 1, size_t(ch.count - 1));
    const DraftVerdict v =
        verify_draft(rows, V, real_vocab, draft, s.q.empty() ? nullptr : s.q.data(), sampling, rng, scratch_);
    engine.keep_draft(ch.slot, engine.length(ch.slot) - ch.count + 1 + v.accepted);
    out_.assign(draft.begin(), draft.begin() + v.accepted);
    out_.push_back(v.next);
    s.length.record(int64_t(draft.size()), v.accepted, s.evidence);
    reprice(engine, s);
    const SpecCounts step{1, int64_t(draft.size()), v.accepted};
    s.counts.add(step);
    total_.add(step);
  }
  s.context.insert(s.context.end(), out_.begin(), out_.end());
  return out_;
}

}  // namespace zaya
