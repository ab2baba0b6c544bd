#pragma once
// Completions "echo": each choice's text starts with its prompt, and with
// logprobs its tokens come first too, as OpenAI's legacy completions and
// vLLM give them, and as lm-evaluation-harness's `local-completions` scores
// loglikelihood requests (it sends echo, max_tokens 1, logprobs 1 and reads
// token_logprobs[ctxlen:-1] with top_logprobs).
//
// Each prompt token's log p given the tokens before it and the most likely
// alternatives come from one scoring pass over the prompt (infer/scorer.h,
// the cached decoder's prefill logits): the same values `zaya score` gives
// for those tokens. The first token has nothing before it: null, as OpenAI's.

#include <cstdint>
#include <vector>

#include "zaya/data/tokenizer.h"
#include "zaya/infer/infer_model.h"
#include "zaya/infer/scorer.h"
#include "zaya/infer/text_request.h"
#include "zaya/serve/openai_response.h"

namespace zaya {

// The echoed start of each choice of `texts` (prompt by prompt, `n` choices
// each, as openai_text_requests makes them): its prompt's text and, when
// top_logprobs >= 0, its prompt tokens' logprobs with that many alternatives.
// Each prompt is scored once, whatever n is.
std::vector<ChoiceResult> echo_choices(const InferModel& model, const Tokenizer& tokenizer,
                                       const std::vector<TextRequest>& texts, int64_t n, int64_t top_logprobs,
                                       ScorerOptions options);

}  // namespace zaya
