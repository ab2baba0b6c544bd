#include "zaya/infer/spec_decode.h"

#include "zaya/core/enum_names.h"
#include "zaya/core/error.h"
#include "zaya/infer/batch_scheduler.h"
#include "zaya/infer/spec_verify.h"

namespace zaya {

void SpecOptions::validate() const {
  ZAYA_CHECK_USAGE(tokens >= 1 && tokens <= 64, "--spec-tokens {} is invalid; allowed: 1..64", tokens);
  ZAYA_CHECK_USAGE(ngram.min_ngram >= 1 && ngram.max_ngram >= ngram.min_ngram && ngram.max_ngram <= 64,
                   "n-gram sizes {}..{} are invalid; allowed: 1 <= min <= max <= 64", ngram.min_ngram, ngram.max_ngram);
}

namespace {
constexpr EnumName<SpecMethod> kSpecMethodNames[] = {{SpecMethod::kNone, "none"}, {SpecMethod::kNgram, "ngram"}};
}  // namespace

SpecMethod parse_spec_method(const std::string& name) {
  const SpecMethod* m = enum_find<SpecMethod>(kSpecMethodNames, name);
  ZAYA_CHECK_USAGE(m != nullptr, "--spec {} is invalid; allowed: {}", name, enum_allowed<SpecMethod>(kSpecMethodNames));
  return *m;
}

const char* spec_method_name(SpecMethod m) { return enum_name<SpecMethod>(kSpecMethodNames, m); }

Speculator::Speculator(const SpecOptions& o, int64_t slots) : options_(o), slots_(size_t(slots)) {
  o.validate();
  for (Slot& s : slots_) s.length = DraftLength(o.tokens, o.adaptive);
}

void Speculator::start(int32_t slot, std::span<const int32_t> prompt) {
  Slot& s = slots_[size_t(slot)];
  s.context.assign(prompt.begin(), prompt.end());
  s.length = DraftLength(options_.tokens, options_.adaptive);
  s.counts = {};
}

void Speculator::propose(BatchScheduler& sched, int32_t slot, int64_t room) {
  Slot& s = slots_[size_t(slot)];
  const int64_t k = std::min(s.length.next(), room);
  draft_.clear();
  if (k > 0) ngram_draft(s.context, k, options_.ngram, draft_);
  if (draft_.empty()) {
    s.length.skipped();
    return;
  }
  sched.propose(slot, draft_);
}

const std::vector<int32_t>& Speculator::tokens(InferenceEngine& engine, const StepChunk& ch, const float* rows,
                                               int64_t V, int64_t real_vocab, const SamplingOptions& sampling,
                                               Rng& rng) {
  Slot& s = slots_[size_t(ch.slot)];
  out_.clear();
  if (!ch.speculative) {
    // A plain row (a decode token or a prompt's last): as plain decoding samples it.
    out_.push_back(sample_token(rows, real_vocab, sampling, rng, scratch_));
  } else {
    const std::span<const int32_t> draft(ch.tokens + 1, size_t(ch.count - 1));
    const DraftVerdict v = verify_draft(rows, V, real_vocab, draft, nullptr, sampling, rng, scratch_);
    engine.keep_draft(ch.slot, engine.length(ch.slot) - ch.count + 1 + v.accepted);
    out_.assign(draft.begin(), draft.begin() + v.accepted);
    out_.push_back(v.next);
    s.length.record(int64_t(draft.size()), v.accepted);
    const SpecCounts step{1, int64_t(draft.size()), v.accepted};
    s.counts.add(step);
    total_.add(step);
  }
  s.context.insert(s.context.end(), out_.begin(), out_.end());
  return out_;
}

}  // namespace zaya
