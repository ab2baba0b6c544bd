#include "zaya/serve/openai_response.h"

namespace zaya {
namespace {

ojson bytes_of(const std::string& s) {
  ojson b = ojson::array();
  for (unsigned char ch : s) b.push_back(int(ch));
  return b;
}

ojson chat_logprobs(const std::vector<TokenLogprob>& lps) {
  ojson content = ojson::array();
  for (const TokenLogprob& t : lps) {
    ojson top = ojson::array();
    for (const auto& [text, lp] : t.top) top.push_back({{"token", text}, {"logprob", lp}, {"bytes", bytes_of(text)}});
    content.push_back({{"token", t.text},
                       {"logprob", t.logprob ? ojson(*t.logprob) : ojson()},
                       {"bytes", bytes_of(t.text)},
                       {"top_logprobs", top}});
  }
  return {{"content", content}};
}

// text_offset counts from the start of the choice's text (`offset` for a chunk).
// An echoed prompt's first token has no logprob: null in token_logprobs and
// top_logprobs, as OpenAI's (lm-eval reads from the context's end onwards).
ojson completion_logprobs(const std::vector<TokenLogprob>& lps, int64_t offset) {
  ojson tokens = ojson::array(), lp = ojson::array(), top = ojson::array(), at = ojson::array();
  for (const TokenLogprob& t : lps) {
    tokens.push_back(t.text);
    lp.push_back(t.logprob ? ojson(*t.logprob) : ojson());
    ojson alt = ojson::object();
    for (const auto& [text, l] : t.top)
      if (!alt.contains(text)) alt[text] = l;
    top.push_back(t.logprob ? alt : ojson());
    at.push_back(offset);
    offset += int64_t(t.text.size());
  }
  return {{"tokens", tokens}, {"token_logprobs", lp}, {"top_logprobs", top}, {"text_offset", at}};
}

ojson tool_calls_json(const std::vector<ApiToolCall>& calls, bool streamed) {
  ojson out = ojson::array();
  for (const ApiToolCall& t : calls) {
    ojson call = ojson::object();
    if (streamed) call["index"] = t.index;
    call["id"] = t.id;
    call["type"] = "function";
    call["function"] = {{"name", t.name}, {"arguments", t.arguments}};
    out.push_back(call);
  }
  return out;
}

// The assistant message of a whole chat response: content (null when it only
// calls tools, as OpenAI's), the reasoning under both names clients read, the calls.
ojson chat_message(const ChoiceResult& c) {
  ojson m = {{"role", "assistant"}, {"content", c.text.empty() && !c.tool_calls.empty() ? ojson() : ojson(c.text)}};
  if (!c.reasoning.empty()) {
    m["reasoning_content"] = c.reasoning;
    m["reasoning"] = c.reasoning;
  }
  if (!c.tool_calls.empty()) m["tool_calls"] = tool_calls_json(c.tool_calls, false);
  return m;
}

ojson head_json(const ResponseHead& h, const char* object) {
  return {{"id", h.id}, {"object", object}, {"created", h.created}, {"model", h.model}};
}

}  // namespace

const char* api_finish_reason(FinishReason r, bool called) {
  if (called) return "tool_calls";  // as vLLM's: whatever ended the answer after its calls
  return r == FinishReason::kStop ? "stop" : "length";
}

ojson api_error(const std::string& message, const std::string& type, const std::string& param) {
  return {
      {"error",
       {{"message", message}, {"type", type}, {"param", param.empty() ? ojson() : ojson(param)}, {"code", nullptr}}}};
}

ojson api_response(const ResponseHead& h, const std::vector<ChoiceResult>& choices, int64_t prompt_tokens) {
  ojson j = head_json(h, h.chat ? "chat.completion" : "text_completion");
  ojson list = ojson::array();
  int64_t completion = 0;
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceResult& c = choices[i];
    completion += c.tokens;
    ojson choice = {{"index", i}};
    if (h.chat)
      choice["message"] = chat_message(c);
    else
      choice["text"] = c.text;
    choice["logprobs"] = !h.logprobs ? ojson()
                         : h.chat    ? chat_logprobs(c.logprobs)
                                     : completion_logprobs(c.logprobs, 0);
    choice["finish_reason"] = api_finish_reason(c.finish, !c.tool_calls.empty());
    list.push_back(choice);
  }
  j["choices"] = list;
  j["usage"] = {{"prompt_tokens", prompt_tokens},
                {"completion_tokens", completion},
                {"total_tokens", prompt_tokens + completion}};
  SpecCounts spec;
  for (const ChoiceResult& c : choices) spec.add(c.spec);
  add_speculative_usage(j["usage"], spec);
  return j;
}

ojson api_chunk(const ResponseHead& h, size_t index, const std::string& text, bool first,
                const std::vector<TokenLogprob>& logprobs, const FinishReason* finish) {
  ojson j = head_json(h, h.chat ? "chat.completion.chunk" : "text_completion");
  ojson choice = {{"index", index}};
  if (h.chat) {
    ojson delta = ojson::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || first) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = !h.logprobs ? ojson() : h.chat ? chat_logprobs(logprobs) : completion_logprobs(logprobs, 0);
  choice["finish_reason"] = finish ? ojson(api_finish_reason(*finish)) : ojson();
  j["choices"] = ojson::array({choice});
  return j;
}

ojson api_chat_chunk(const ResponseHead& h, size_t index, const ChatDelta& d, const std::vector<TokenLogprob>& logprobs,
                     const FinishReason* finish, bool called) {
  ojson j = head_json(h, "chat.completion.chunk");
  ojson delta = ojson::object();
  if (!d.reasoning.empty()) {
    delta["reasoning_content"] = d.reasoning;
    delta["reasoning"] = d.reasoning;
  }
  if (!d.content.empty()) delta["content"] = d.content;
  if (!d.tool_calls.empty()) delta["tool_calls"] = tool_calls_json(d.tool_calls, true);
  ojson choice = {{"index", index}, {"delta", delta}};
  choice["logprobs"] = h.logprobs ? chat_logprobs(logprobs) : ojson();
  choice["finish_reason"] = finish ? ojson(api_finish_reason(*finish, called)) : ojson();
  j["choices"] = ojson::array({choice});
  return j;
}

ojson api_usage_chunk(const ResponseHead& h, int64_t prompt_tokens, int64_t completion_tokens, const SpecCounts& spec) {
  ojson j = head_json(h, h.chat ? "chat.completion.chunk" : "text_completion");
  j["choices"] = ojson::array();
  j["usage"] = {{"prompt_tokens", prompt_tokens},
                {"completion_tokens", completion_tokens},
                {"total_tokens", prompt_tokens + completion_tokens}};
  add_speculative_usage(j["usage"], spec);
  return j;
}

void add_speculative_usage(ojson& usage, const SpecCounts& spec) {
  if (spec.drafts == 0) return;
  usage["speculative"] = {{"drafts", spec.drafts},
                          {"draft_tokens", spec.drafted},
                          {"accepted_tokens", spec.accepted},
                          {"acceptance_rate", spec.acceptance_rate()},
                          {"mean_accepted_length", spec.mean_accepted_length()}};
}

ojson api_models(const std::string& model, int64_t created) {
  return {{"object", "list"},
          {"data", ojson::array({{{"id", model}, {"object", "model"}, {"created", created}, {"owned_by", "zaya"}}})}};
}

std::string dump_api(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

}  // namespace zaya
