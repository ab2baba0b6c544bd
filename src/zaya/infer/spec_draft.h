#pragma once
// Drafting for speculative decoding (docs/inference.md, "Speculative
// decoding"): what to propose for the target model to check in one forward
// over 1 + K positions (spec_verify.h), and how many tokens to propose.
//
// - ngram_draft: prompt lookup (Saxena's "prompt lookup decoding", vLLM's and
//   llama.cpp's n-gram drafting): the last n tokens of the context are looked
//   up earlier in the context (prompt and generated text), the most recent
//   occurrence of the longest n from max_ngram down to min_ngram wins, and the
//   tokens that followed it are the draft. It costs no model and pays on text
//   that repeats its context (code edits, quotations, summaries, lists).
// - DraftLength: the adaptive K of one sequence. A fully accepted draft
//   doubles the next one (up to the maximum); a partly accepted one proposes
//   one more token than were accepted; after kMaxMisses drafts in a row with
//   nothing accepted the sequence stops drafting for kPause steps, then probes
//   with one token; each probe that fails doubles the pause (up to kMaxPause),
//   an accepted token resets it. So a sequence whose drafts keep failing
//   decodes almost as plain decoding does (one probe per up to kMaxPause steps).
// - Drafter: the drafting step of a Speculator (spec_decode.h), one interface
//   for both methods: NgramDrafter (prompt lookup, above) and ModelDrafter (a
//   smaller ZAYA model with its own cache, spec_model.h).

#include <cstdint>
#include <span>
#include <vector>

#include "zaya/core/rng.h"
#include "zaya/infer/sampling.h"

namespace zaya {

struct NgramDraftOptions {
  int64_t max_ngram = 3;  // longest suffix looked up
  int64_t min_ngram = 1;  // shortest
};

// Up to `max_tokens` tokens that followed the most recent earlier occurrence of
// the context's last n tokens (see above) into `out` (cleared first); empty when
// nothing matches or max_tokens <= 0.
void ngram_draft(std::span<const int32_t> context, int64_t max_tokens, const NgramDraftOptions& options,
                 std::vector<int32_t>& out);

class DraftLength {
 public:
  static constexpr int64_t kMaxMisses = 3;
  static constexpr int64_t kPause = 8;
  static constexpr int64_t kMaxPause = 128;

  // max_tokens: the most tokens one draft may hold (--spec-tokens); adaptive off: always max_tokens.
  explicit DraftLength(int64_t max_tokens = 4, bool adaptive = true);
  // Tokens to draft at the next step (0: none).
  int64_t next() const { return paused_ > 0 ? 0 : k_; }
  // A step without a draft (paused, or nothing to propose).
  void skipped();
  // A checked draft of `drafted` tokens of which the first `accepted` were kept.
  void record(int64_t drafted, int64_t accepted);

 private:
  int64_t max_, k_;
  bool adaptive_;
  int64_t misses_ = 0, paused_ = 0, pause_ = kPause;
};

// One sequence's draft at a step (Drafter::draft).
struct DraftJob {
  int32_t slot = 0;
  // Prompt and emitted tokens; the last one is the target's next input (the
  // draft continues after it).
  std::span<const int32_t> context;
  int64_t max_tokens = 0;                     // draft at most this many (>= 1)
  const SamplingOptions* sampling = nullptr;  // the sequence's: a model drafts as it would sample
  Rng* rng = nullptr;                         // the sequence's draft stream (apart from the target's)
  std::vector<int32_t>* tokens = nullptr;     // out: the draft (empty: none)
  // out: one row per draft token, the distribution it was drawn from (row
  // stride: the target's vocabulary, as verify_draft reads it); empty: point
  // masses (an n-gram draft).
  std::vector<float>* q = nullptr;
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  // A new sequence starts in the slot.
  virtual void start(int32_t slot) = 0;
  // The drafts of every job (distinct slots) at once: a model batches its steps over them.
  virtual void draft(std::span<const DraftJob> jobs) = 0;
};

class NgramDrafter final : public Drafter {
 public:
  explicit NgramDrafter(const NgramDraftOptions& options) : options_(options) {}
  void start(int32_t) override {}
  void draft(std::span<const DraftJob> jobs) override;

 private:
  NgramDraftOptions options_;
};

}  // namespace zaya
