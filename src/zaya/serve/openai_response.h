#pragma once
// The JSON an OpenAI-style client reads: responses of /v1/completions and
// /v1/chat/completions (whole, and as server-sent-event chunks), /v1/models
// and errors. Every document is dumped with invalid UTF-8 replaced (a token's
// own text can be part of a character).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "zaya/infer/generator.h"
#include "zaya/infer/spec_decode.h"
#include "zaya/serve/chat_output.h"

namespace zaya {

using ojson = nlohmann::ordered_json;

// One token (generated, or an echoed prompt's) as logprobs report it.
struct TokenLogprob {
  std::string text;                                // the token's own text
  std::optional<float> logprob;                    // none for an echoed prompt's first token (null, as OpenAI's)
  std::vector<std::pair<std::string, float>> top;  // alternatives, most likely first
};

struct ChoiceResult {
  std::string text;       // with echo, the prompt first (prompt_echo.h); chat: the content (chat_output.h)
  std::string reasoning;  // chat: the think block's text
  std::vector<ApiToolCall> tool_calls;  // chat: the calls read from the answer
  FinishReason finish = FinishReason::kLength;
  int64_t tokens = 0;
  std::vector<TokenLogprob> logprobs;  // with echo and logprobs, the prompt's tokens first
  SpecCounts spec;                     // speculative decoding's drafts for this choice
};

// The header fields of every response of one request.
struct ResponseHead {
  std::string id;  // "cmpl-N" or "chatcmpl-N"
  int64_t created = 0;
  std::string model;
  bool chat = false;
  bool logprobs = false;  // logprobs were asked for
};

// "stop" for stop ids and strings, "length" for the token limit and the context end;
// "tool_calls" for a chat answer that called tools (as vLLM's).
const char* api_finish_reason(FinishReason r, bool called = false);

// {"error": {"message", "type", "param", "code"}}; param null when "".
ojson api_error(const std::string& message, const std::string& type, const std::string& param = "");

// The whole response: choices in order and usage.
ojson api_response(const ResponseHead& head, const std::vector<ChoiceResult>& choices, int64_t prompt_tokens);

// One streamed chunk of choice `index`: its new text (and, for chat, the role on
// the first chunk), the logprobs of the tokens it carries, and a finish reason on the last.
ojson api_chunk(const ResponseHead& head, size_t index, const std::string& text, bool first,
                const std::vector<TokenLogprob>& logprobs, const FinishReason* finish);
// One streamed chat chunk of choice `index`: a ChatDelta's reasoning
// ("reasoning_content" and "reasoning"), content and tool calls (each whole:
// index, id, type, function name and arguments), the logprobs of its tokens,
// and a finish reason on the last ("tool_calls" when `called`).
ojson api_chat_chunk(const ResponseHead& head, size_t index, const ChatDelta& delta,
                     const std::vector<TokenLogprob>& logprobs, const FinishReason* finish, bool called);
// The final usage chunk (stream_options.include_usage): no choices.
ojson api_usage_chunk(const ResponseHead& head, int64_t prompt_tokens, int64_t completion_tokens,
                      const SpecCounts& spec = {});
// usage["speculative"] (a zaya extension), present when a draft was checked:
// drafts, draft_tokens, accepted_tokens, acceptance_rate, mean_accepted_length.
void add_speculative_usage(ojson& usage, const SpecCounts& spec);

ojson api_models(const std::string& model, int64_t created);

// Compact JSON with invalid UTF-8 replaced by U+FFFD.
std::string dump_api(const ojson& j);

}  // namespace zaya
