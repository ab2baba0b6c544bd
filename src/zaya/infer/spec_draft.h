#pragma once
// Drafting for speculative decoding (docs/inference.md, "Speculative
// decoding"): what to propose for the target model to check in one forward
// over 1 + K positions (spec_verify.h); how many is DraftLength's
// (spec_length.h).
//
// - ngram_draft: prompt lookup (Saxena's "prompt lookup decoding", vLLM's and
//   llama.cpp's n-gram drafting): the last n tokens of the context are looked
//   up earlier in the context (prompt and generated text), the most recent
//   occurrence of the longest n from max_ngram (16) down to min_ngram wins, and
//   the tokens that followed it are the draft (one pass over the context);
//   where they reach the context's end, the draft goes on copying itself (text
//   that repeats with a short period drafts K tokens, not one period). It costs no model and pays on text
//   that repeats its context (code edits, quotations, summaries, lists).
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
  int64_t max_ngram = 16;  // longest suffix looked up (a longer match is better evidence, spec_length.h)
  int64_t min_ngram = 1;   // shortest
};

// Up to `max_tokens` tokens that followed the most recent earlier occurrence of
// the context's last n tokens (see above) into `out` (cleared first); empty when
// nothing matches or max_tokens <= 0. Returns that n (0: none): the draft's
// evidence (DraftLength prices drafts per match length, spec_length.h).
int64_t ngram_draft(std::span<const int32_t> context, int64_t max_tokens, const NgramDraftOptions& options,
                    std::vector<int32_t>& out);

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
  int64_t* evidence = nullptr;  // out: the n-gram match length (ngram_draft); a model's: 0
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  // A new sequence starts in the slot.
  virtual void start(int32_t slot) = 0;
  // The drafts of every job (distinct slots) at once: a model batches its steps over them.
  virtual void draft(std::span<const DraftJob> jobs) = 0;
  // Drafting costs nothing (an n-gram lookup): the Speculator drafts the most
  // and then trims the draft to the length its evidence pays for.
  virtual bool costless() const { return false; }
};

class NgramDrafter final : public Drafter {
 public:
  explicit NgramDrafter(const NgramDraftOptions& options) : options_(options) {}
  void start(int32_t) override {}
  void draft(std::span<const DraftJob> jobs) override;
  bool costless() const override { return true; }

 private:
  NgramDraftOptions options_;
};

}  // namespace zaya
