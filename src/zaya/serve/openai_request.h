#pragma once
// The body of an OpenAI-style /v1/completions or /v1/chat/completions
// request: parsed and checked field by field, each problem named by its field
// (the `param` of an OpenAI error), then turned into the text requests the
// serving loop runs (infer/serving_loop.h).
//
// Fields (anything else is ignored, as OpenAI's clients send fields of their
// own): model, prompt (completions: a string or a list of one string),
// messages (chat: {role, content} with content a string or a list of
// {"type": "text", "text"} parts), max_tokens (or max_completion_tokens),
// stop (a string or up to 4), temperature (0..2), top_p (0..1], top_k (>= 0,
// 0 = off), seed, n, stream, stream_options.include_usage, logprobs
// (completions: 0..5 alternatives; chat: a boolean, with top_logprobs 0..20).
// presence_penalty, frequency_penalty, logit_bias, echo, best_of and tools
// are refused unless they ask for nothing (0, {}, false, 1, []).

#include <cstdint>
#include <string>
#include <vector>

#include "zaya/data/chat_template.h"
#include "zaya/data/tokenizer.h"
#include "zaya/infer/text_request.h"
#include "zaya/model/config.h"

namespace zaya {

enum class ApiEndpoint { kCompletions, kChat };

struct ApiLimits {
  int64_t max_n = 16;                 // choices per request
  int64_t default_max_tokens = 1024;  // chat without max_tokens (completions default to 16, as OpenAI's)
};

struct OpenAiRequest {
  ApiEndpoint endpoint = ApiEndpoint::kCompletions;
  std::string model;
  std::string prompt;                 // completions
  std::vector<ChatMessage> messages;  // chat
  int64_t max_tokens = -1;            // -1: not given
  std::vector<std::string> stop;
  double temperature = 1.0;
  double top_p = 1.0;
  int64_t top_k = 0;
  uint64_t seed = 0;
  int64_t n = 1;
  bool stream = false;
  bool include_usage = false;
  int64_t top_logprobs = -1;  // -1: no logprobs; else alternatives per token
  // Set when the body cannot run: the message, and the field it is about ("" for the body).
  std::string error, error_param;
};

// Parses and checks a request body; a problem is in .error / .error_param.
OpenAiRequest parse_openai_request(const std::string& body, ApiEndpoint endpoint, const ApiLimits& limits);

// The n text requests (choice i with seed + i) of a checked request: the
// prompt (chat: encode_chat, add_generation_prompt) and its ids, stop ids
// (the default ones, and <end_of_turn> for chat) and stop strings (the
// request's, and "<end_of_turn>" for a chat model without the marker),
// sampling; max_tokens capped at what the context leaves after the prompt.
// Sets request.error / error_param (and returns none) when the prompt cannot
// run under `context` tokens.
std::vector<TextRequest> openai_text_requests(OpenAiRequest& request, const Tokenizer& tokenizer,
                                              const ZayaConfig& config, int64_t context, const ApiLimits& limits);

}  // namespace zaya
