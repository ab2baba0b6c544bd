#include "zaya/infer/evaluation.h"

#include "zaya/core/timer.h"

namespace zaya {
namespace {

PerplexityRun timed_perplexity(const InferModel& model, const std::vector<std::vector<int32_t>>& docs,
                               const std::vector<std::vector<uint8_t>>& loss_masks, const PerplexityOptions& options) {
  PerplexityRun run;
  const double t0 = now_seconds();
  run.result = perplexity(model, docs, loss_masks, options);
  run.seconds = now_seconds() - t0;
  return run;
}

}  // namespace

PerplexityRun text_perplexity(const InferModel& model, const Tokenizer& tok, const std::string& path,
                              const DocumentLimits& limits, const PerplexityOptions& options) {
  int64_t bytes = 0;
  const auto docs = text_documents(path, tok, limits.max_documents, limits.max_tokens, &bytes);
  PerplexityRun run = timed_perplexity(model, docs, {}, options);
  run.bytes = bytes;
  return run;
}

PerplexityRun shard_perplexity(const InferModel& model, const std::string& prefix, const DocumentLimits& limits,
                               const PerplexityOptions& options, bool apply_loss_mask) {
  const ShardDocuments shard =
      shard_documents(prefix, model.config().vocab_size, limits.max_documents, limits.max_tokens, apply_loss_mask);
  PerplexityRun run = timed_perplexity(model, shard.docs, shard.loss_masks, options);
  run.loss_mask = shard.mask;
  return run;
}

MultipleChoiceRun multiple_choice_file(const InferModel& model, const Tokenizer* tok, const std::string& path,
                                       int64_t max_items, const ScorerOptions& options) {
  MultipleChoiceRun run;
  run.items = read_mc_items(path, tok, model.config().vocab_size, max_items);
  const double t0 = now_seconds();
  run.summary = evaluate_multiple_choice(model, run.items, options);
  run.seconds = now_seconds() - t0;
  return run;
}

}  // namespace zaya
