#pragma once
// Continuous batching as one component, apart from the forward
// (/work/shared/ARCHITECTURE.md: one scheduler for every way of decoding;
// docs/developer-guide.md, "The pieces of a decode"). zaya generate
// (generator.cc), zaya serve (serving_loop.cc) and scoring (scorer.cc, which
// zaya score, zaya eval and the server's prompt logprobs use) all run it, so
// they cannot drift apart: each loop admits, plans a step, runs the engine,
// and (generating) samples and asks the scheduler whether the sequence ends.
//
// - Admission: waiting sequences go, in arrival order, to the lowest free
//   slot, each when its pages at its longest (KvPagePool::max_pages) fit
//   beside the reservations of those running; the first that does not fit
//   waits, and so does everything behind it (no overtaking: a long request is
//   not starved by short ones).
// - Chunk planning: every decoding sequence feeds its last token, then
//   prompt chunks of the others fill the rest of the step's token budget, in
//   slot order (chunked prefill). With a snapshot block B (the prefix cache),
//   a prompt chunk ends at a multiple of B where it can, so that the state
//   there can be snapshotted. A teacher-forced sequence (scoring: its tokens
//   are all known) is planned as a prompt that never decodes, with logits at
//   its last token or at every token.
// - Finish rule: before a step, a cancelled sequence (kCancelled) or one
//   asked for no tokens (kLength); after each sampled token, in this order:
//   what the caller saw (a cancellation: kCancelled; a stop string completed
//   in the text, which only the caller decodes: kStop), a stop id (kStop), the
//   sequence's token limit (kLength), the context end (kContext).
//
// The scheduler knows nothing of the engine: its plan is a list of
// StepChunk, so it is tested with a fake engine (batch_scheduler_test.cc).

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "zaya/infer/engine.h"
#include "zaya/infer/generator.h"

namespace zaya {

struct SchedulerOptions {
  int64_t slots = 1;                // sequences that run together
  int64_t step_tokens = 1;          // tokens per step (at least `slots`: every decoding sequence fits)
  int64_t snapshot_block = 0;       // > 0: prompt chunks end at multiples of it where they can
  std::vector<int64_t> pool_pages;  // per KV kind: the pages reservations may take; empty: no page accounting
};

// What the caller saw of a sampled token that the scheduler cannot: its
// client went away or its token callback said stop, or the decoded text
// completed a stop string (completion_text.h).
enum class CallerStop { kNone, kCancelled, kStopString };

class BatchScheduler {
 public:
  explicit BatchScheduler(const SchedulerOptions& options);

  int64_t slots() const { return int64_t(slots_.size()); }
  bool running(int32_t slot) const { return slots_[slot].running; }
  int64_t running_count() const { return running_; }
  // Per kind: the pages the running sequences reserved.
  const std::vector<int64_t>& reserved() const { return reserved_; }
  int64_t reserved_total() const;

  // Admission of the next waiting sequence, in two halves so that a caller can
  // move the request to where it lives while it runs: place() says where it
  // would go: the lowest free slot, or kNoSlot, or kNoPages when `pages` (per
  // kind, at its longest) do not fit beside the reservations; start() puts it
  // there (the request outlives its run).
  static constexpr int32_t kNoSlot = -1, kNoPages = -2;
  bool full() const { return running_ == slots(); }
  int32_t place(const std::vector<int64_t>& pages) const;
  void start(int32_t slot, const GenerationRequest& request, std::vector<int64_t> pages);
  // A teacher-forced sequence (scoring): `tokens` (>= 1, outliving the run)
  // are fed in prompt chunks with logits at the last one (kLast) or at every
  // one (kAll); it never decodes, and plans nothing once they are fed.
  void start_forced(int32_t slot, std::span<const int32_t> tokens, LogitsWanted logits);
  // The slot's sequence starts from a cached state of its first `tokens` prompt tokens.
  void resume_at(int32_t slot, int64_t tokens);
  // A sequence whose whole prompt another slot prefills (a fork: requests with
  // one prompt admitted together, generator.h): it plans nothing until its
  // first token is accept()ed, sampled from that slot's last prompt logits
  // after the caller copied that slot's state into this one; then it decodes.
  void start_forked(int32_t slot, const GenerationRequest& request, std::vector<int64_t> pages);
  // The slot's sequence ends: its slot and its reservation are free.
  void end(int32_t slot);

  // Whether the slot's sequence decodes (its prompt is in, a token sampled).
  bool decoding(int32_t slot) const;
  // Speculative decoding (spec_decode.h): the decoding sequence's next chunk
  // checks `draft` after its last token, as one speculative chunk with logits
  // at every position. plan() trims the draft to what the sequence's token
  // limit can still use (a checked draft of k emits up to k + 1 tokens) and to
  // the step budget left after one token per decoding sequence, then forgets it.
  void propose(int32_t slot, std::span<const int32_t> draft);

  // The next step: decoding sequences first (one token each, or a proposed
  // draft's chunk), then prompt chunks in the remaining budget. Empty when nothing runs.
  const std::vector<StepChunk>& plan();
  int64_t planned_prompt_tokens() const { return planned_prompt_tokens_; }
  // After the engine ran the plan: prompt progress. Returns the slots whose
  // chunk ended at a snapshot block boundary before their prompt's end.
  const std::vector<int32_t>& advance();

  // Before planning a step: why a running generating sequence ends now, if it
  // does (`cancelled`: the caller's request was withdrawn).
  std::optional<FinishReason> ends_before_step(int32_t slot, bool cancelled) const;
  // After sampling `token` for a slot whose sequence now holds `length` of
  // `max_context` tokens: records it (fed at the next step) and returns why
  // the sequence ends, if it does.
  std::optional<FinishReason> accept(int32_t slot, int32_t token, int64_t length, int64_t max_context,
                                     CallerStop caller = CallerStop::kNone);

  // Prompt (or teacher-forced) tokens in the cache, and tokens generated, of a
  // running slot. Between plan() and advance(), fed() is where each planned
  // prompt chunk starts.
  int64_t fed(int32_t slot) const { return slots_[slot].fed; }
  int64_t generated(int32_t slot) const { return slots_[slot].generated; }

 private:
  struct Slot {
    bool running = false;
    std::span<const int32_t> prompt;  // fed first, in chunks (outlives the run)
    std::span<const int32_t> stop_ids;
    const LoraAdapters* lora = nullptr;  // every chunk's adapter (the request's; it outlives the run)
    int64_t max_new_tokens = 0;
    bool decodes = true;                               // false: teacher-forced, the prompt only
    LogitsWanted prompt_logits = LogitsWanted::kLast;  // kLast: at the prompt's last token; kAll: every one
    int64_t fed = 0;                                   // prompt tokens in the cache
    bool forked = false;                               // start_forked: waits for its first token
    int32_t last = -1;                                 // the last sampled token, fed at the next step
    std::vector<int32_t> verify;                       // a proposed draft's chunk: [last, draft]
    int64_t draft = 0;                                 // tokens of the proposed draft (0: none)
    int64_t generated = 0;
    std::vector<int64_t> pages;  // reserved, per kind
    int64_t prompt_size() const { return int64_t(prompt.size()); }
  };
  void occupy(int32_t slot, Slot s);

  int64_t step_tokens_, snapshot_block_;
  std::vector<int64_t> pool_pages_, reserved_;
  std::vector<Slot> slots_;  // never resized: chunks point at Slot::last
  int64_t running_ = 0;
  std::vector<StepChunk> chunks_;
  int64_t planned_prompt_tokens_ = 0;
  std::vector<int32_t> boundaries_;
};

}  // namespace zaya
