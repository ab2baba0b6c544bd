#pragma once
// The body of an OpenAI-style /v1/completions or /v1/chat/completions
// request: parsed and checked field by field, each problem named by its field
// (the `param` of an OpenAI error), then turned into the text requests the
// serving loop runs (infer/serving_loop.h).
//
// Fields (anything else is ignored, as OpenAI's clients send fields of their
// own): model, prompt (completions: a string, a list of strings, a list of
// token ids, or a list of token-id lists; each prompt gets its own n choices,
// choice prompt_index * n + i, as OpenAI's), echo (completions: the prompt
// comes first in each choice's text, and with logprobs its tokens' log
// probabilities, the first null; not with stream), messages (chat: {role,
// content} with content a string or a list of {"type": "text", "text"} parts;
// role "developer" is read as "system", as newer OpenAI SDKs send it; in the
// zaya format also an assistant's "tool_calls" and "reasoning_content" (or
// "reasoning"), and role "tool" with "tool_call_id"), tools and tool_choice
// (zaya format; chat_json.h checks them), chat_template_kwargs.enable_thinking,
// parallel_tool_calls (a boolean),
// max_tokens (or max_completion_tokens), stop (a string or up to
// ApiLimits::max_stop strings: vLLM takes any number, lm-eval sends 5+),
// temperature (0..2), top_p (0..1], top_k (>= 0, 0 = off), seed, n, stream,
// stream_options.include_usage, ignore_eos (vLLM's extension, a boolean: no
// stop id ends the completion, which runs to max_tokens unless a stop string
// ends it; not beside response_format, whose grammar ends at a stop id), logprobs (completions: 0..5 alternatives;
// chat: a boolean, with top_logprobs 0..20). presence_penalty,
// frequency_penalty, logit_bias, best_of, functions and function_call are
// refused unless they ask for nothing (0, {}, 1, [], "none"); so are tools and
// a tool-call history in the gemma3 format. response_format (both endpoints):
// text, json_object or json_schema (json_schema.h), not beside tools; it turns
// thinking off (the answer is the JSON value alone).
//
// A message never shows a client's value whole (json_preview), and the body's
// nesting is capped while it is parsed (parse_json): a hostile value can
// neither flood a message nor overflow the stack.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "zaya/data/chat_json.h"
#include "zaya/data/chat_template.h"
#include "zaya/data/tokenizer.h"
#include "zaya/infer/json_grammar.h"
#include "zaya/infer/text_request.h"
#include "zaya/model/config.h"

namespace zaya {

enum class ApiEndpoint { kCompletions, kChat };

struct ApiLimits {
  int64_t max_n = 16;                            // choices per prompt
  int64_t max_prompts = 64;                      // prompts in one completions request (a batch of lm-eval's)
  int64_t max_stop = 32;                         // stop strings
  int64_t default_max_tokens = 1024;             // chat without max_tokens (completions default to 16, as OpenAI's)
  ChatFormat chat_format = ChatFormat::kGemma3;  // the model's (--chat-format, chat_format.h)
  bool enable_thinking = true;                   // zaya: chat_template_kwargs.enable_thinking's default
  int64_t max_tools = 128;                       // tools in one request (--max-tools)
};

// One completions prompt: text (encoded with BOS) or token ids (run as given).
struct ApiPrompt {
  std::string text;
  std::vector<int32_t> ids;
  bool is_ids = false;
};

struct OpenAiRequest {
  ApiEndpoint endpoint = ApiEndpoint::kCompletions;
  std::string model;
  std::vector<ApiPrompt> prompts;     // completions: one or more
  bool echo = false;                  // completions: the prompt (and its logprobs) come first in each choice
  std::vector<ChatMessage> messages;  // chat
  std::vector<ChatTool> tools;        // chat (zaya format): offered to the model
  ToolChoice tool_choice;             // chat: auto unless given
  bool enable_thinking = true;        // chat (zaya): chat_template_kwargs.enable_thinking, else the server's
  int64_t max_tokens = -1;            // -1: not given
  std::vector<std::string> stop;
  double temperature = 1.0;
  double top_p = 1.0;
  int64_t top_k = 0;
  uint64_t seed = 0;
  int64_t n = 1;
  bool stream = false;
  bool include_usage = false;
  bool ignore_eos = false;    // vLLM: no stop id ends the completion
  int64_t top_logprobs = -1;  // -1: no logprobs; else alternatives per token
  // response_format json_object / json_schema: the grammar the completion is
  // held to (token_constraint.h); null: plain text.
  std::shared_ptr<const JsonGrammar> response_grammar;
  // Set when the body cannot run: the message, and the field it is about ("" for the body).
  std::string error, error_param;
};

// Parses and checks a request body; a problem is in .error / .error_param.
OpenAiRequest parse_openai_request(const std::string& body, ApiEndpoint endpoint, const ApiLimits& limits);

// The bodies of the tokenizer endpoints (tokenizer_api.h), as vLLM's
// /tokenize and /detokenize take them and lm-evaluation-harness's remote
// tokenizer sends them: {"prompt": TEXT, "add_special_tokens": BOOL
// (default true: BOS first), "return_token_strs": BOOL} and {"tokens": [IDS]}.
// Other fields ("model") are ignored. The ids are checked against the
// vocabulary by the caller, which knows it.
struct TokenizeRequest {
  std::string text;
  bool add_special_tokens = true;
  bool return_token_strs = false;
  std::string error, error_param;
};
TokenizeRequest parse_tokenize_request(const std::string& body);

struct DetokenizeRequest {
  std::vector<int32_t> tokens;
  std::string error, error_param;
};
DetokenizeRequest parse_detokenize_request(const std::string& body);

// The n text requests (choice i with seed + i) of each prompt of a checked
// request, prompt by prompt: the prompt (chat: encode_chat,
// add_generation_prompt; token ids as given, their text decoded) and its ids, stop ids
// (the default ones, and <end_of_turn> for chat) and stop strings (the
// request's, and "<end_of_turn>" for a chat model without the marker),
// sampling; max_tokens capped at what the context leaves after the prompt.
// Sets request.error / error_param (and returns none) when the prompt cannot
// run under `context` tokens.
// How a checked chat request is rendered: the server's format, the request's
// thinking, its tools unless tool_choice is "none", and for "required" or a
// named function the opening of a call after a closed think block (the call is
// then prefilled, not left to the model: chat_template.h, forced_tool).
ChatOptions chat_options(const OpenAiRequest& request, const ApiLimits& limits);

std::vector<TextRequest> openai_text_requests(OpenAiRequest& request, const Tokenizer& tokenizer,
                                              const ZayaConfig& config, int64_t context, const ApiLimits& limits);

}  // namespace zaya
