#pragma once
// Perplexity of held-out documents (token shards or text), scored with the
// cached decoder (scorer.h).
//
// A document of n tokens contributes its n - 1 next-token predictions, each
// scored exactly once. A document longer than the window is cut into windows
// of at most `context` tokens (Hugging Face's strided perplexity): the first
// scores tokens 1..context-1, each later one the next `stride` tokens with
// the rest of the window (the tokens just before them) as context. The
// default stride, context - 1, makes windows overlap by one token; a smaller
// stride gives every scored token more context at more compute.
//
// Loss masks (fine-tuning data, data/loss_mask.h, docs/formats.md "Loss
// masks"): with a mask per document, the prediction of token t counts only
// when the mask selects token t, the training sampler's rule (data/sampler.h:
// a target counts when its bit is set). The windows and their context are the
// same (every token is context); only the sum changes, and a window none of
// whose targets is selected is not run. A document is scored alone, so its
// first token is never a target, with or without a mask; training, whose
// windows run documents together, also counts a selected first token as the
// target after the previous document's last (`zaya data sft` selects no bos
// unless --loss-on all).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "zaya/data/tokenizer.h"
#include "zaya/infer/scorer.h"

namespace zaya {

struct PerplexityOptions {
  int64_t context = 0;  // window length; 0: min(max_position_embeddings, 2048)
  int64_t stride = 0;   // new tokens per later window, 1..context-1; 0: context - 1
  ScorerOptions scorer;
};

// The window `requested` (PerplexityOptions::context) gives for a model.
int64_t perplexity_context(const ZayaConfig& config, int64_t requested);

struct PerplexityResult {
  int64_t documents = 0;  // documents with at least 2 tokens
  int64_t windows = 0;    // windows run
  int64_t tokens = 0;     // predictions scored (with masks: the selected targets)
  double nll = 0;         // their summed negative log-likelihood (nats)
  double mean_nll() const { return tokens > 0 ? nll / double(tokens) : 0.0; }
  double perplexity() const;
  // nll in bits per byte of text (0 when bytes is 0).
  double bits_per_byte(int64_t bytes) const;
};

// The windows of one document as score groups (empty for < 2 tokens).
std::vector<ScoreGroup> perplexity_windows(const std::vector<int32_t>& doc, int64_t context, int64_t stride);
// The same windows with `mask` (one 0/1 per token of doc) as each window's
// counted targets, leaving out the windows that count none.
std::vector<ScoreGroup> perplexity_windows(const std::vector<int32_t>& doc, const std::vector<uint8_t>& mask,
                                           int64_t context, int64_t stride);

PerplexityResult perplexity(const InferModel& model, const std::vector<std::vector<int32_t>>& docs,
                            const PerplexityOptions& options, const std::function<void(size_t, size_t)>& progress = {});
// With loss masks: empty (every target counts) or one per document, as long
// as it; only the targets they select are scored (see above).
PerplexityResult perplexity(const InferModel& model, const std::vector<std::vector<int32_t>>& docs,
                            const std::vector<std::vector<uint8_t>>& loss_masks, const PerplexityOptions& options,
                            const std::function<void(size_t, size_t)>& progress = {});

// A shard's loss mask as read for evaluation.
struct ShardLossMask {
  std::string path;      // PREFIX.mask; empty when the shard has none
  bool applied = false;  // false: the file exists but was ignored (apply_loss_mask false)
  int64_t selected = 0;  // tokens it selects in the documents read (applied only)
  int64_t tokens = 0;    // tokens of those documents
};

struct ShardDocuments {
  std::vector<std::vector<int32_t>> docs;        // as stored ([bos] tokens [eos])
  std::vector<std::vector<uint8_t>> loss_masks;  // one per document when the mask is applied; else empty
  ShardLossMask mask;
};

// Documents of a token shard (PREFIX.bin/.idx) and, when PREFIX.mask exists
// and apply_loss_mask, their loss-mask bits. The mask is read and checked by
// ShardReader::open (its size, counts, checksum and the shard's token
// checksum): a mask that does not belong to the shard fails naming the file
// and the field, as in training. Fails if the shard's vocabulary is larger
// than the model's. At most max_documents documents / max_tokens tokens (0:
// no limit).
ShardDocuments shard_documents(const std::string& prefix, int64_t model_vocab, int64_t max_documents,
                               int64_t max_tokens, bool apply_loss_mask = true);

// Documents of a text corpus (blank-line separated, corpus.h), each encoded as
// [bos] tokens [eos] as `zaya data shards` does. Adds the documents' UTF-8
// bytes to *bytes (for bits per byte).
std::vector<std::vector<int32_t>> text_documents(const std::string& path, const Tokenizer& tokenizer,
                                                 int64_t max_documents, int64_t max_tokens, int64_t* bytes);

}  // namespace zaya
