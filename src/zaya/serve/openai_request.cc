#include "zaya/serve/openai_request.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "zaya/core/error.h"
#include "zaya/infer/json_schema.h"
#include "zaya/io/json_file.h"

namespace zaya {
namespace {

// Ordered: a tool's schema is rendered with its keys in the client's order.
using json = nlohmann::ordered_json;

// A problem with one field: thrown inside the parser, caught at its top.
struct FieldError {
  std::string param, message;
};

[[noreturn]] void bad(const std::string& param, std::string message) { throw FieldError{param, std::move(message)}; }

// What a message shows of a client's value: bounded, whatever the value (H1).
std::string shown(const json& v) { return json_preview(v); }

int64_t int_field(const json& v, const std::string& k, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) bad(k, fmt::format("'{}' must be an integer; got {}", k, shown(v)));
  const int64_t x = v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX) ? INT64_MAX : v.get<int64_t>();
  if (x < lo || x > hi) bad(k, fmt::format("'{}' = {} is invalid; allowed: {}..{}", k, x, lo, hi));
  return x;
}

double number_field(const json& v, const std::string& k, double lo, double hi, bool open_lo) {
  if (!v.is_number()) bad(k, fmt::format("'{}' must be a number; got {}", k, shown(v)));
  const double x = v.get<double>();
  if (!(open_lo ? x > lo : x >= lo) || !(x <= hi))
    bad(k, fmt::format("'{}' = {} is invalid; allowed: {}{}, {}]", k, shown(v), open_lo ? "(" : "[", lo, hi));
  return x;
}

bool bool_field(const json& v, const std::string& k) {
  if (!v.is_boolean()) bad(k, fmt::format("'{}' must be true or false; got {}", k, shown(v)));
  return v.get<bool>();
}

std::string content_text(const json& v, const std::string& k) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) bad(k, fmt::format("'{}' must be a string or a list of text parts; got {}", k, shown(v)));
  std::string text;
  for (size_t i = 0; i < v.size(); ++i) {
    const json& part = v[i];
    const std::string at = fmt::format("{}[{}]", k, i);
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
        !part["text"].is_string())
      bad(at, fmt::format("'{}' must be {{\"type\": \"text\", \"text\": \"...\"}} (only text is supported); got {}", at,
                          shown(part)));
    text += part["text"].get<std::string>();
  }
  return text;
}

// Set and not null.
bool has(const json& j, const char* k) { return j.contains(k) && !j[k].is_null(); }

// A chat message's tool parts (zaya format): an assistant's tool_calls and
// reasoning, a tool message's call id. Legacy function calling is refused.
void tool_parts(const json& m, const std::string& at, ChatFormat format, ChatMessage& out) {
  const bool calls = has(m, "tool_calls") && !(m["tool_calls"].is_array() && m["tool_calls"].empty());
  if (format != ChatFormat::kZaya && (calls || out.role == "tool"))
    bad(at + (calls ? ".tool_calls" : ".role"),
        fmt::format("'{}' is {}, but this model's chat format {} has no tool {} (the zaya format, ZAYA1-8B's, has: "
                    "--chat-format zaya)",
                    at + (calls ? ".tool_calls" : ".role"), calls ? "set" : "\"tool\"",
                    enum_name<ChatFormat>(kChatFormatNames, format), calls ? "calls" : "results"));
  if (out.role == "function")
    bad(at + ".role", fmt::format("'{}.role' is \"function\" (legacy function calling); use role \"tool\"", at));
  if (has(m, "function_call"))
    bad(at + ".function_call",
        fmt::format("'{}.function_call' is legacy function calling; send \"tool_calls\" instead", at));
  if (calls) {
    if (out.role != "assistant")
      bad(at + ".tool_calls",
          fmt::format("'{}.tool_calls' is set on a {} message; only an assistant calls tools", at, out.role));
    out.tool_calls = read_tool_calls(m["tool_calls"], at + ".tool_calls");
  }
  for (const char* k : {"reasoning_content", "reasoning"})
    if (has(m, k) && out.role == "assistant") {
      if (!m[k].is_string()) bad(fmt::format("{}.{}", at, k), fmt::format("'{}.{}' must be a string", at, k));
      out.reasoning = m[k].get<std::string>();
    }
  if (has(m, "tool_call_id") && out.role == "tool") {
    if (!m["tool_call_id"].is_string())
      bad(at + ".tool_call_id", fmt::format("'{}.tool_call_id' must be a string", at));
    out.tool_call_id = m["tool_call_id"].get<std::string>();
  }
}

std::vector<ChatMessage> messages_field(const json& v, ChatFormat format) {
  if (!v.is_array() || v.empty()) bad("messages", "'messages' must be a non-empty list of {\"role\", \"content\"}");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string at = fmt::format("messages[{}]", i);
    const json& m = v[i];
    if (!m.is_object()) bad(at, fmt::format("'{}' must be an object with \"role\" and \"content\"", at));
    if (!m.contains("role") || !m["role"].is_string())
      bad(at + ".role", fmt::format("'{}.role' must be a string (system, developer, user, assistant or tool)", at));
    ChatMessage msg;
    msg.role = m["role"].get<std::string>();
    tool_parts(m, at, format, msg);
    // Checked here, not only by check_chat, so that the message shows a bounded role.
    if (msg.role != "system" && msg.role != "developer" && msg.role != "user" && msg.role != "assistant" &&
        msg.role != "tool")
      bad(at + ".role", fmt::format("'{}.role' = {} is invalid; allowed: system, developer, user, assistant, tool", at,
                                    shown(m["role"])));
    if (msg.role == "developer") msg.role = "system";  // OpenAI's newer name for the system message
    // An assistant message that calls tools may have no content (null), as OpenAI's clients send it.
    if (has(m, "content"))
      msg.content = content_text(m["content"], at + ".content");
    else if (msg.tool_calls.empty())
      bad(at + ".content", fmt::format("'{}.content' is missing", at));
    out.push_back(std::move(msg));
  }
  try {
    check_chat(out, format);
  } catch (const Error& e) {
    bad("messages", e.what());
  }
  return out;
}

// tools, tool_choice, parallel_tool_calls and chat_template_kwargs.
void tool_fields(const json& j, const ApiLimits& limits, OpenAiRequest& r) {
  const bool offered = has(j, "tools") && !(j["tools"].is_array() && j["tools"].empty());
  if (offered && limits.chat_format != ChatFormat::kZaya)
    bad("tools", fmt::format("'tools' is set, but this model's chat format {} has no tool calls (the zaya format, "
                             "ZAYA1-8B's, has: --chat-format zaya)",
                             enum_name<ChatFormat>(kChatFormatNames, limits.chat_format)));
  if (offered) r.tools = read_chat_tools(j["tools"], size_t(limits.max_tools));
  if (has(j, "tool_choice")) r.tool_choice = read_tool_choice(j["tool_choice"], r.tools);
  if (has(j, "parallel_tool_calls")) bool_field(j["parallel_tool_calls"], "parallel_tool_calls");
  r.enable_thinking = limits.enable_thinking;
  if (has(j, "chat_template_kwargs")) {
    const json& k = j["chat_template_kwargs"];
    if (!k.is_object()) bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    if (has(k, "enable_thinking"))
      r.enable_thinking = bool_field(k["enable_thinking"], "chat_template_kwargs.enable_thinking");
  }
}

std::vector<std::string> stop_field(const json& v, int64_t max_stop) {
  if (v.is_string()) return {v.get<std::string>()};
  if (!v.is_array() || int64_t(v.size()) > max_stop)
    bad("stop", fmt::format("'stop' must be a string or a list of up to {} strings; got {}", max_stop,
                            v.is_array() ? fmt::format("{} strings", v.size()) : shown(v)));
  std::vector<std::string> out;
  for (const json& s : v) {
    if (!s.is_string()) bad("stop", fmt::format("'stop' must hold strings; got {}", shown(s)));
    out.push_back(s.get<std::string>());
  }
  return out;
}

// A field we do not implement: allowed only with the value that asks for
// nothing. (== recurses, but only as deep as parse_json lets a value nest.)
void unsupported(const json& body, const char* k, const json& neutral, const char* what) {
  if (!has(body, k) || body[k] == neutral) return;
  bad(k, fmt::format("'{}' = {} is not supported; allowed: {} ({})", k, shown(body[k]), neutral.dump(), what));
}

// Token ids as a client sends them: integers in 0..INT32_MAX (the vocabulary
// is checked against the model later, openai_text_requests), `param` naming the field.
std::vector<int32_t> id_list(const json& v, const std::string& at, const std::string& param) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < v.size(); ++i) {
    const json& id = v[i];
    const bool ok = id.is_number_unsigned()
                        ? id.get<uint64_t>() <= uint64_t(INT32_MAX)
                        : id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() <= INT32_MAX;
    if (!ok) bad(param, fmt::format("'{}[{}]' = {} is not a token id (an integer >= 0)", at, i, shown(id)));
    ids.push_back(int32_t(id.get<int64_t>()));
  }
  return ids;
}

ApiPrompt id_prompt(const json& v, const std::string& at) {
  if (v.empty()) bad("prompt", fmt::format("'{}' is an empty list of token ids", at));
  return {{}, id_list(v, at, "prompt"), true};
}

// A string, a list of strings, a list of token ids (one prompt), or a list of token-id lists.
std::vector<ApiPrompt> prompt_field(const json& v, int64_t max_prompts) {
  constexpr const char* kForms = "a string, a list of strings, a list of token ids, or a list of token-id lists";
  if (v.is_string()) return {ApiPrompt{v.get<std::string>(), {}, false}};
  if (!v.is_array() || v.empty()) bad("prompt", fmt::format("'prompt' must be {}; got {}", kForms, shown(v)));
  if (v[0].is_number()) return {id_prompt(v, "prompt")};
  if (int64_t(v.size()) > max_prompts)
    bad("prompt", fmt::format("'prompt' holds {} prompts; allowed: up to {} per request", v.size(), max_prompts));
  std::vector<ApiPrompt> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string at = fmt::format("prompt[{}]", i);
    if (v[i].is_string())
      out.push_back({v[i].get<std::string>(), {}, false});
    else if (v[i].is_array())
      out.push_back(id_prompt(v[i], at));
    else
      bad("prompt", fmt::format("'{}' = {} is invalid: 'prompt' must be {}", at, shown(v[i]), kForms));
  }
  return out;
}

// response_format (docs/serve.md): {"type": "text"} asks for nothing; "json_object" for any JSON object;
// "json_schema" for a value of json_schema.schema (json_schema.h: what is supported, its limits).
void response_format_field(const json& f, OpenAiRequest& r) {
  constexpr const char* kForms = "text, json_object, json_schema";
  if (!f.is_object())
    bad("response_format",
        fmt::format("'response_format' must be an object {{\"type\": ...}} ({}); got {}", kForms, shown(f)));
  if (!has(f, "type") || !f["type"].is_string())
    bad("response_format.type", fmt::format("'response_format.type' must be one of {}; got {}", kForms,
                                            has(f, "type") ? shown(f["type"]) : "nothing"));
  const std::string type = f["type"].get<std::string>();
  if (type == "text") return;
  if (type == "json_object") {
    r.response_grammar = std::make_shared<const JsonGrammar>();
    return;
  }
  if (type != "json_schema")
    bad("response_format.type",
        fmt::format("'response_format.type' = {} is not supported; allowed: {}", shown(f["type"]), kForms));
  if (!has(f, "json_schema") || !f["json_schema"].is_object())
    bad("response_format.json_schema",
        "'response_format.json_schema' must be an object {\"name\": ..., \"schema\": {...}, \"strict\": ...}");
  const json& js = f["json_schema"];
  if (has(js, "name") && !js["name"].is_string())
    bad("response_format.json_schema.name", "'response_format.json_schema.name' must be a string");
  if (has(js, "strict")) bool_field(js["strict"], "response_format.json_schema.strict");
  if (!js.contains("schema"))
    bad("response_format.json_schema.schema",
        "'response_format.json_schema.schema' is required: the JSON schema the answer follows");
  JsonSchemaGrammar g = compile_json_schema(js["schema"], "response_format.json_schema.schema");
  if (!g.error.empty()) bad(g.error_path, fmt::format("'{}': {}", g.error_path, g.error));
  r.response_grammar = std::make_shared<const JsonGrammar>(std::move(g.grammar));
}

void parse_fields(const json& j, ApiEndpoint endpoint, const ApiLimits& limits, OpenAiRequest& r) {
  const auto has = [&](const char* k) { return zaya::has(j, k); };
  if (has("model")) {
    if (!j["model"].is_string()) bad("model", "'model' must be a string");
    r.model = j["model"].get<std::string>();
  }
  if (endpoint == ApiEndpoint::kCompletions) {
    if (!has("prompt")) bad("prompt", "'prompt' is required");
    r.prompts = prompt_field(j["prompt"], limits.max_prompts);
  } else {
    if (!has("messages")) bad("messages", "'messages' is required");
    r.messages = messages_field(j["messages"], limits.chat_format);
    tool_fields(j, limits, r);
  }
  if (has("max_completion_tokens"))
    r.max_tokens = int_field(j["max_completion_tokens"], "max_completion_tokens", 0, 1 << 24);
  if (has("max_tokens")) r.max_tokens = int_field(j["max_tokens"], "max_tokens", 0, 1 << 24);
  if (has("stop")) r.stop = stop_field(j["stop"], limits.max_stop);
  if (has("temperature")) r.temperature = number_field(j["temperature"], "temperature", 0, 2, false);
  if (has("top_p")) r.top_p = number_field(j["top_p"], "top_p", 0, 1, true);
  if (has("top_k")) r.top_k = int_field(j["top_k"], "top_k", 0, INT32_MAX);
  if (has("seed")) {
    const json& s = j["seed"];
    if (!s.is_number_integer()) bad("seed", fmt::format("'seed' must be an integer; got {}", shown(s)));
    r.seed = s.is_number_unsigned() ? s.get<uint64_t>() : uint64_t(s.get<int64_t>());
  }
  if (has("n")) r.n = int_field(j["n"], "n", 1, limits.max_n);
  if (has("stream")) r.stream = bool_field(j["stream"], "stream");
  if (has("ignore_eos")) r.ignore_eos = bool_field(j["ignore_eos"], "ignore_eos");
  if (has("stream_options")) {
    const json& so = j["stream_options"];
    if (!so.is_object()) bad("stream_options", "'stream_options' must be an object");
    if (so.contains("include_usage") && !so["include_usage"].is_null())
      r.include_usage = bool_field(so["include_usage"], "stream_options.include_usage");
  }
  if (endpoint == ApiEndpoint::kCompletions) {
    if (has("logprobs")) r.top_logprobs = int_field(j["logprobs"], "logprobs", 0, 5);
    if (has("echo")) r.echo = bool_field(j["echo"], "echo");
    if (r.echo && r.stream)
      bad("echo", "'echo' = true is not supported with \"stream\": true; allowed: false, or a whole response");
    unsupported(j, "best_of", 1, "one sample per choice");
    unsupported(j, "suffix", "", "no insertion");
  } else {
    const bool lp = has("logprobs") && bool_field(j["logprobs"], "logprobs");
    if (has("top_logprobs")) {
      const int64_t top = int_field(j["top_logprobs"], "top_logprobs", 0, 20);
      if (!lp) bad("top_logprobs", "'top_logprobs' needs \"logprobs\": true");
      r.top_logprobs = top;
    } else if (lp) {
      r.top_logprobs = 0;
    }
    unsupported(j, "functions", json::array(), "legacy function calling; send \"tools\"");
    unsupported(j, "function_call", "none", "legacy function calling; send \"tool_choice\"");
  }
  if (has("response_format")) response_format_field(j["response_format"], r);
  if (r.response_grammar && !r.tools.empty() && r.tool_choice.kind != ToolChoice::Kind::kNone)
    bad("response_format", "'response_format' with 'tools' is not supported; send one of them (or tool_choice none)");
  if (r.response_grammar && r.ignore_eos)
    bad("ignore_eos", "'ignore_eos' = true is not supported with 'response_format' (its value ends at a stop id)");
  if (r.response_grammar) r.enable_thinking = false;  // the answer is the value alone (docs/serve.md)
  unsupported(j, "presence_penalty", 0, "no penalties");
  unsupported(j, "frequency_penalty", 0, "no penalties");
  unsupported(j, "logit_bias", json::object(), "no biases");
}

// Runs `fields` on the parsed body; a problem lands in r.error / r.error_param.
template <class Request, class Fields>
Request parse_body(const std::string& body, Request r, const Fields& fields) {
  try {
    const json j = parse_json<json>(body, "the request body");
    if (!j.is_object()) bad("", "the request body must be a JSON object");
    fields(j, r);
  } catch (const FieldError& e) {
    r.error = e.message;
    r.error_param = e.param;
  } catch (const ChatFieldError& e) {
    r.error = e.what();
    r.error_param = e.param;
  } catch (const Error& e) {
    r.error = e.what();
  }
  return r;
}

}  // namespace

OpenAiRequest parse_openai_request(const std::string& body, ApiEndpoint endpoint, const ApiLimits& limits) {
  OpenAiRequest r;
  r.endpoint = endpoint;
  return parse_body(body, r, [&](const json& j, OpenAiRequest& out) { parse_fields(j, endpoint, limits, out); });
}

TokenizeRequest parse_tokenize_request(const std::string& body) {
  return parse_body(body, TokenizeRequest{}, [](const json& j, TokenizeRequest& r) {
    if (!has(j, "prompt") || !j["prompt"].is_string())
      bad("prompt", fmt::format("'prompt' must be a string (the text to tokenize); got {}",
                                has(j, "prompt") ? shown(j["prompt"]) : "nothing"));
    r.text = j["prompt"].get<std::string>();
    if (has(j, "add_special_tokens")) r.add_special_tokens = bool_field(j["add_special_tokens"], "add_special_tokens");
    if (has(j, "return_token_strs")) r.return_token_strs = bool_field(j["return_token_strs"], "return_token_strs");
  });
}

DetokenizeRequest parse_detokenize_request(const std::string& body) {
  return parse_body(body, DetokenizeRequest{}, [](const json& j, DetokenizeRequest& r) {
    if (!has(j, "tokens") || !j["tokens"].is_array())
      bad("tokens", fmt::format("'tokens' must be a list of token ids; got {}",
                                has(j, "tokens") ? shown(j["tokens"]) : "nothing"));
    r.tokens = id_list(j["tokens"], "tokens", "tokens");
  });
}

}  // namespace zaya
