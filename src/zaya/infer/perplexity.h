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

struct PerplexityResult {
  int64_t documents = 0;  // documents with at least 2 tokens
  int64_t windows = 0;
  int64_t tokens = 0;  // predictions scored
  double nll = 0;      // their summed negative log-likelihood (nats)
  double mean_nll() const { return tokens > 0 ? nll / double(tokens) : 0.0; }
  double perplexity() const;
  // nll in bits per byte of text (0 when bytes is 0).
  double bits_per_byte(int64_t bytes) const;
};

// The windows of one document as score groups (empty for < 2 tokens).
std::vector<ScoreGroup> perplexity_windows(const std::vector<int32_t>& doc, int64_t context, int64_t stride);

PerplexityResult perplexity(const InferModel& model, const std::vector<std::vector<int32_t>>& docs,
                            const PerplexityOptions& options, const std::function<void(size_t, size_t)>& progress = {});

// Documents of a token shard (PREFIX.bin/.idx), as stored ([bos] tokens [eos]).
// Fails if the shard's vocabulary is larger than the model's. At most
// max_documents documents / max_tokens tokens (0: no limit).
std::vector<std::vector<int32_t>> shard_documents(const std::string& prefix, int64_t model_vocab, int64_t max_documents,
                                                  int64_t max_tokens);

// Documents of a text corpus (blank-line separated, corpus.h), each encoded as
// [bos] tokens [eos] as `zaya data shards` does. Adds the documents' UTF-8
// bytes to *bytes (for bits per byte).
std::vector<std::vector<int32_t>> text_documents(const std::string& path, const Tokenizer& tokenizer,
                                                 int64_t max_documents, int64_t max_tokens, int64_t* bytes);

}  // namespace zaya
