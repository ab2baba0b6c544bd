#pragma once
// Speculative decoding in a decode loop (docs/inference.md, "Speculative
// decoding"): the per-sequence part that zaya generate's loop (generator.cc)
// and zaya serve's (serving_loop.cc) share. It keeps each running sequence's
// tokens (prompt and emitted) and its adaptive draft length, has its Drafter
// (spec_draft.h: n-gram lookup; spec_model.h: a draft model) draft for every
// decoding sequence at once, proposes the drafts
// to the batch scheduler before the step (BatchScheduler::propose: the plan
// then carries a speculative chunk [last token, draft] with logits at every
// position), and after the step checks it (spec_verify.h), settles the
// engine's slot on the kept prefix (InferenceEngine::keep_draft) and returns
// the tokens to emit. The loop emits them one by one through the scheduler's
// finish rule, so a stop id, a stop string or the token limit inside an
// accepted run ends the sequence there, as in plain decoding.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "zaya/core/rng.h"
#include "zaya/infer/engine.h"
#include "zaya/infer/sampling.h"
#include "zaya/infer/spec_draft.h"
#include "zaya/infer/spec_length.h"

namespace zaya {

class BatchScheduler;

class InferModel;

enum class SpecMethod { kNone, kNgram, kModel };

// The default K per method (--spec-tokens not given): an n-gram draft is free
// but its matches are short, a draft model pays for each token and its drafts
// run long (docs/performance.md, "Speculative decoding": the K sweep of
// 2026-12-07).
inline constexpr int64_t kSpecTokensNgram = 8;
inline constexpr int64_t kSpecTokensModel = 16;

struct SpecOptions {
  SpecMethod method = SpecMethod::kNone;
  // K: the most draft tokens one step checks (--spec-tokens); 0: the method's default (max_tokens()).
  int64_t tokens = 0;
  bool adaptive = true;  // DraftLength's priced K (spec_length.h); false: always K when a draft exists
  NgramDraftOptions ngram;
  // kModel: the draft model (--spec-model; spec_model.h: open_draft_model checks it), not owned: it outlives the loop.
  const InferModel* draft_model = nullptr;
  // `tokens`, or the method's default when it is 0 (kSpecTokensNgram, kSpecTokensModel).
  int64_t max_tokens() const;
  void validate() const;
};
// "none" | "ngram" | "model" (--spec); fails naming the allowed values.
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
  // For the slots of `target` (a draft model runs beside it, spec_model.h);
  // ids >= sample_vocab are never drafted.
  Speculator(const SpecOptions& options, const InferenceEngine& target, int64_t sample_vocab);
  ~Speculator();
  bool enabled() const { return options_.method != SpecMethod::kNone; }

  // A sequence starts in the slot with this prompt (the tokens drafts continue)
  // and its sampling (a draft model drafts as the sequence samples); with
  // drafts false it decodes one token a step (a constrained sequence:
  // token_constraint.h masks each row before it is sampled).
  void start(int32_t slot, std::span<const int32_t> prompt, const SamplingOptions& sampling, bool drafts = true);
  // Before plan(): drafts for every decoding sequence of the scheduler (each up
  // to its adaptive K, and to the draft tokens its target cache can still take,
  // InferenceEngine::draft_room) and proposes them.
  void propose(BatchScheduler& scheduler, const InferenceEngine& target);
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
    SamplingOptions sampling;
    Rng draft_rng;               // the draft model's draws (its own stream)
    std::vector<int32_t> draft;  // the draft proposed at this step
    std::vector<float> q;        // and its distributions (empty: point masses)
    int64_t evidence = 0;        // and its evidence (DraftJob::evidence)
    bool drafts = true;          // false: never proposes (start)
  };
  // Observes the target's last step (RoutingSpread) and reprices the slot's drafts.
  void reprice(const InferenceEngine& engine, Slot& s);

  SpecOptions options_;
  DraftCost cost_;        // of the target's checks and the drafter's tokens (draft_cost)
  RoutingSpread spread_;  // the target's routing, measured on its steps (prices cost_)
  AcceptancePool pool_;   // every sequence's acceptance: the priors of each slot's DraftLength
  const InferModel* target_model_;
  std::unique_ptr<Drafter> drafter_;
  std::vector<Slot> slots_;
  SpecCounts total_;
  std::vector<DraftJob> jobs_;
  std::vector<int32_t> out_;
  SamplingScratch scratch_;
};

}  // namespace zaya
