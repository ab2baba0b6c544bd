#pragma once
// Log-likelihood scoring with the cached decoder, the way lm-evaluation-harness
// scores `loglikelihood` requests: for a context and a continuation, the sum
// over the continuation's tokens of log p(token | everything before it), and
// whether every one of them was the greedy (argmax) choice.
//
// Requests come in groups sharing one prefix (a multiple-choice item: one
// context, several endings). The prefix is prefilled once into a slot, the
// slot is copied once per continuation (engine.copy), and the continuations
// run together: the context is computed once per item, not once per choice.
// Groups are packed into the slots; each phase (the prefixes, then the
// continuations) runs as teacher-forced sequences whose ragged steps the
// batch scheduler plans within the token budget (batch_scheduler.h), the
// same component that plans zaya generate's and zaya serve's steps.
//
// A group may say which continuation tokens count (`counted`: a loss mask,
// perplexity.h): the others are still fed (they are context for the tokens
// after them) but their log p is neither computed nor summed, and the score's
// tokens and greedy cover only the counted ones.

#include <cstdint>
#include <functional>
#include <vector>

#include "zaya/infer/infer_model.h"
#include "zaya/infer/token_logprobs.h"

namespace zaya {

struct ScoreGroup {
  std::vector<int32_t> prefix;                      // >= 1 token (BOS at least)
  std::vector<std::vector<int32_t>> continuations;  // >= 1 continuation of >= 1 token each
  // Empty: every continuation token counts. Otherwise one entry per
  // continuation, as long as it: 1 = that token's log p counts, 0 = it does not.
  std::vector<std::vector<uint8_t>> counted;
};

struct ContinuationScore {
  double logprob = 0;  // sum of log p over the continuation's counted tokens (nats)
  int64_t tokens = 0;  // counted tokens (all of them without `counted`)
  bool greedy = true;  // every counted token was the argmax (true when none counts)
  // With ScorerOptions::token_top >= 0: each counted token's log p and the
  // most likely alternatives at its position, in order (a server's prompt
  // logprobs, OpenAI's "echo"), as token_logprobs.h reports a sampled token.
  std::vector<TokenLogprobs> per_token;
};

struct ScorerOptions {
  int64_t max_batch = 16;        // sequences in flight (at least the largest group's continuations)
  int64_t step_tokens = 512;     // tokens per forward step
  int64_t score_vocab = 0;       // softmax over ids below this; 0: the config's real vocabulary
  bool bf16_activations = true;  // see EngineOptions
  int64_t token_top = -1;        // >= 0: fill ContinuationScore::per_token with this many alternatives
};

// Returns scores[g][k] for continuation k of group g. progress(done, total) is
// called after each batch of groups.
std::vector<std::vector<ContinuationScore>> score_groups(const InferModel& model, const std::vector<ScoreGroup>& groups,
                                                         const ScorerOptions& options,
                                                         const std::function<void(size_t, size_t)>& progress = {});

// log p(target) and whether target is the argmax, from one row of logits over
// ids [0, vocab) (the padding rows beyond are excluded).
struct TargetLogprob {
  double logprob = 0;
  bool greedy = false;
};
TargetLogprob target_logprob(const float* logits, int64_t vocab, int32_t target);

}  // namespace zaya
