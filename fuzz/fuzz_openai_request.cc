// Fuzz target: the body of an HTTP request to zaya serve
// (serve/openai_request.h), parsed as a completions and as a chat request,
// and as the tokenizer endpoints' /tokenize and /detokenize bodies.
// Whatever the bytes, parsing must end in a request or a 400-style error,
// never a crash (a nested value once overflowed the stack when a message
// printed it) or an exception of another kind; an error's message is bounded
// (no client value is shown whole), and an accepted request is within the
// limits the parser promises.

#include <cstddef>
#include <cstdint>
#include <string>

#include "zaya/serve/openai_request.h"

namespace {

// Small limits, so the fuzzer meets them.
zaya::ApiLimits limits() {
  zaya::ApiLimits l;
  l.chat_format = zaya::ChatFormat::kZaya;  // the format with tools, tool results and reasoning: more to parse
  l.max_tools = 4;
  l.max_n = 4;
  l.max_prompts = 3;
  l.max_stop = 5;
  return l;
}

void check(const zaya::OpenAiRequest& r, zaya::ApiEndpoint endpoint, const zaya::ApiLimits& l) {
  if (!r.error.empty()) {
    // The longest fixed text plus a few ~100-character previews; a value shown whole would exceed it.
    if (r.error.size() > 1024) __builtin_trap();
    return;
  }
  if (r.n < 1 || r.n > l.max_n) __builtin_trap();
  if (int64_t(r.stop.size()) > l.max_stop) __builtin_trap();
  if (r.max_tokens < -1 || r.max_tokens > (1 << 24)) __builtin_trap();
  if (!(r.temperature >= 0 && r.temperature <= 2) || !(r.top_p > 0 && r.top_p <= 1)) __builtin_trap();
  if (endpoint == zaya::ApiEndpoint::kCompletions) {
    if (r.prompts.empty() || int64_t(r.prompts.size()) > l.max_prompts) __builtin_trap();
    for (const zaya::ApiPrompt& p : r.prompts)
      if (p.is_ids && p.ids.empty()) __builtin_trap();
    if (r.echo && r.stream) __builtin_trap();
    if (r.top_logprobs > 5) __builtin_trap();
  } else {
    if (r.messages.empty() || r.top_logprobs > 20) __builtin_trap();
    for (const zaya::ChatMessage& m : r.messages)
      if (m.role != "system" && m.role != "user" && m.role != "assistant" && m.role != "tool") __builtin_trap();
    if (int64_t(r.tools.size()) > l.max_tools) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  const zaya::ApiLimits l = limits();
  for (zaya::ApiEndpoint e : {zaya::ApiEndpoint::kCompletions, zaya::ApiEndpoint::kChat})
    check(zaya::parse_openai_request(body, e, l), e, l);  // any other exception escapes: libFuzzer reports it
  const zaya::TokenizeRequest t = zaya::parse_tokenize_request(body);
  if (t.error.size() > 1024 || (t.error.empty() && t.text.size() > size)) __builtin_trap();
  const zaya::DetokenizeRequest d = zaya::parse_detokenize_request(body);
  if (d.error.size() > 1024) __builtin_trap();
  for (int32_t id : d.tokens)
    if (id < 0) __builtin_trap();
  return 0;
}
