#pragma once
// A generation request in text, as a front end (zaya generate's --prompt and
// --prompts, a server) receives it: the prompt text, the token-level request
// it becomes (generator.h), and the stop strings that end its completion;
// with the rules every front end shares for turning text into that request.

#include <cstdint>
#include <string>
#include <vector>

#include "zaya/data/tokenizer.h"
#include "zaya/infer/generator.h"
#include "zaya/infer/token_constraint.h"
#include "zaya/model/config.h"

namespace zaya {

struct TextRequest {
  std::string prompt;                     // the text to continue
  GenerationRequest generation;           // prompt ids (encode_prompt), token limit, sampling, stop ids
  std::vector<std::string> stop_strings;  // the completion ends before the first one met (stop_strings.h)
  TokenConstraintFactory constraint;      // set: what each step may sample (token_constraint.h; the server's only)
  // The stop ids are not applied (--ignore-eos, the API's "ignore_eos"): the completion runs to its token limit
  // or a stop string. prepare_text_request drops generation.stop_ids (the server's openai_text_requests too).
  bool ignore_eos = false;
};

// The ids that end a request when none are given: the tokenizer's EOS, and
// every other id of the config's eos_token_id (a list in chat models' config.json).
std::vector<int32_t> default_stop_ids(const Tokenizer& tokenizer, const ZayaConfig& config);

// BOS (unless add_bos is false), then the tokenizer's ids of `text`. Fails if
// that leaves no token, since the decoder needs one to start from.
std::vector<int32_t> encode_prompt(const Tokenizer& tokenizer, const std::string& text, bool add_bos);

// Encodes `request.prompt` into the request's prompt ids (encode_prompt),
// drops its stop ids when it ignores EOS, and checks the request against the model (generation_request_error, with the
// context cap `max_context`, 0 for none). Returns why it cannot run, or ""
// when it can: nothing is generated, so a front end can refuse a request
// before it shows anything of it.
std::string prepare_text_request(TextRequest& request, const Tokenizer& tokenizer, const ZayaConfig& config,
                                 bool add_bos, int64_t max_context = 0);

// `count` copies of `request`, copy i sampling with seed + i: several samples
// of one prompt, each reproducible on its own with its seed.
std::vector<TextRequest> repeat_with_seeds(const TextRequest& request, int64_t count);

}  // namespace zaya
