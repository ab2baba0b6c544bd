#pragma once
// Log probabilities of a row of logits, as an OpenAI-style API reports them:
// the model's own distribution (before temperature, top-k and top-p), over the
// ids that may be sampled.

#include <cstdint>
#include <utility>
#include <vector>

namespace zaya {

struct TokenLogprobs {
  float chosen = 0;                            // log p(chosen id)
  std::vector<std::pair<int32_t, float>> top;  // the `top` most likely ids, most likely first (ties: lower id)
};

TokenLogprobs token_logprobs(const float* logits, int64_t vocab, int32_t chosen, int64_t top);

}  // namespace zaya
