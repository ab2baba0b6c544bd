#pragma once
// The evaluations of `zaya eval`, one input each, timed: the perplexity of a
// text file (perplexity.h: blank-line separated documents) or of a token
// shard, and a multiple-choice file (multiple_choice.h). The time covers the
// scoring, not the reading and tokenizing of the input.

#include <cstdint>
#include <string>
#include <vector>

#include "zaya/data/tokenizer.h"
#include "zaya/infer/multiple_choice.h"
#include "zaya/infer/perplexity.h"

namespace zaya {

// Which documents of an input to use (0: no limit).
struct DocumentLimits {
  int64_t max_documents = 0;
  int64_t max_tokens = 0;  // stop adding documents after this many tokens
};

struct PerplexityRun {
  PerplexityResult result;
  ShardLossMask loss_mask;  // shards: PREFIX.mask, applied or ignored (path empty: none, and for text)
  int64_t bytes = 0;        // UTF-8 bytes of the documents (text only; 0 for shards)
  double seconds = 0;
  double tokens_per_second() const { return seconds > 0 ? double(result.tokens) / seconds : 0; }
};

PerplexityRun text_perplexity(const InferModel& model, const Tokenizer& tokenizer, const std::string& path,
                              const DocumentLimits& limits, const PerplexityOptions& options);
// A shard with a loss mask (PREFIX.mask, fine-tuning data) scores only the
// targets it selects, as training and its validation count them
// (perplexity.h), unless apply_loss_mask is false (every target).
PerplexityRun shard_perplexity(const InferModel& model, const std::string& prefix, const DocumentLimits& limits,
                               const PerplexityOptions& options, bool apply_loss_mask = true);

struct MultipleChoiceRun {
  std::vector<McItem> items;
  McSummary summary;
  double seconds = 0;
};

// `tokenizer` may be null when every item gives token ids. At most max_items
// items (0: all).
MultipleChoiceRun multiple_choice_file(const InferModel& model, const Tokenizer* tokenizer, const std::string& path,
                                       int64_t max_items, const ScorerOptions& options);

}  // namespace zaya
