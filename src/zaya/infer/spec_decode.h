#pragma once
// Speculative decoding in a decode loop (docs/inference.md, "Speculative
// decoding"): the per-sequence part that zaya generate's loop (generator.cc)
// and zaya serve's (serving_loop.cc) share. It keeps each running sequence's
// tokens (prompt and emitted) and its adaptive draft length, proposes a draft
// to the batch scheduler before the step (BatchScheduler::propose: the plan
// then carries a speculative chunk [last token, draft] with logits at every
// position), and after the step checks it (spec_verify.h), settles the
// engine's slot on the kept prefix (InferenceEngine::keep_draft) and returns
// the tokens to emit. The loop emits them one by one through the scheduler's
// finish rule, so a stop id, a stop string or the token limit inside an
// accepted run ends the sequence there, as in plain decoding.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "zaya/core/rng.h"
#include "zaya/infer/engine.h"
#include "zaya/infer/sampling.h"
#include "zaya/infer/spec_draft.h"

namespace zaya {

class BatchScheduler;

enum class SpecMethod { kNone, kNgram };

struct SpecOptions {
  SpecMethod method = SpecMethod::kNone;
  int64_t tokens = 4;    // K: the most draft tokens one step checks (--spec-tokens)
  bool adaptive = true;  // DraftLength's back-off (spec_draft.h); false: always K when a draft exists
  NgramDraftOptions ngram;
  void validate() const;
};
// "none" | "ngram" (--spec); fails naming the allowed values.
SpecMethod parse_spec_method(const std::string& name);
const char* spec_method_name(SpecMethod method);

struct SpecCounts {
  int64_t drafts = 0;    // speculative chunks checked
  int64_t drafted = 0;   // draft tokens checked
  int64_t accepted = 0;  // of them kept
  double acceptance_rate() const { return drafted > 0 ? double(accepted) / double(drafted) : 0; }
  // Tokens emitted per checked draft (kept ones + the one after them).
  double mean_accepted_length() const { return drafts > 0 ? double(accepted + drafts) / double(drafts) : 0; }
  void add(const SpecCounts& o) {
    drafts += o.drafts;
    drafted += o.drafted;
    accepted += o.accepted;
  }
};

class Speculator {
 public:
  Speculator(const SpecOptions& options, int64_t slots);
  bool enabled() const { return options_.method != SpecMethod::kNone; }

  // A sequence starts in the slot with this prompt (the tokens drafts look up).
  void start(int32_t slot, std::span<const int32_t> prompt);
  // Before plan(), for a decoding sequence: proposes its draft. `room`: draft
  // tokens its cache can still take (the context left after the pending token).
  void propose(BatchScheduler& scheduler, int32_t slot, int64_t room);
  // After the step, for one of its chunks with logits (rows: its logit rows,
  // stride V): the tokens to emit, in order (one for a plain chunk), with the
  // engine settled on the kept prefix. Every emitted token is recorded for
  // later drafts; the caller stops emitting where the sequence ends.
  const std::vector<int32_t>& tokens(InferenceEngine& engine, const StepChunk& chunk, const float* rows, int64_t V,
                                     int64_t real_vocab, const SamplingOptions& sampling, Rng& rng);

  const SpecCounts& counts(int32_t slot) const { return slots_[size_t(slot)].counts; }
  const SpecCounts& total() const { return total_; }

 private:
  struct Slot {
    std::vector<int32_t> context;  // prompt + emitted tokens
    DraftLength length;
    SpecCounts counts;
  };
  SpecOptions options_;
  std::vector<Slot> slots_;
  SpecCounts total_;
  std::vector<int32_t> draft_, out_;
  std::vector<std::pair<float, int32_t>> scratch_;
};

}  // namespace zaya
