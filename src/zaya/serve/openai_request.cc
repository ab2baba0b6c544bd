#include "zaya/serve/openai_request.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "zaya/core/error.h"
#include "zaya/io/json_file.h"

namespace zaya {
namespace {

using json = nlohmann::json;

// A problem with one field: thrown inside the parser, caught at its top.
struct FieldError {
  std::string param, message;
};

[[noreturn]] void bad(const std::string& param, std::string message) { throw FieldError{param, std::move(message)}; }

int64_t int_field(const json& v, const std::string& k, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) bad(k, fmt::format("'{}' must be an integer; got {}", k, v.dump()));
  const int64_t x = v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX) ? INT64_MAX : v.get<int64_t>();
  if (x < lo || x > hi) bad(k, fmt::format("'{}' = {} is invalid; allowed: {}..{}", k, x, lo, hi));
  return x;
}

double number_field(const json& v, const std::string& k, double lo, double hi, bool open_lo) {
  if (!v.is_number()) bad(k, fmt::format("'{}' must be a number; got {}", k, v.dump()));
  const double x = v.get<double>();
  if (!(open_lo ? x > lo : x >= lo) || !(x <= hi))
    bad(k, fmt::format("'{}' = {} is invalid; allowed: {}{}, {}]", k, v.dump(), open_lo ? "(" : "[", lo, hi));
  return x;
}

bool bool_field(const json& v, const std::string& k) {
  if (!v.is_boolean()) bad(k, fmt::format("'{}' must be true or false; got {}", k, v.dump()));
  return v.get<bool>();
}

std::string content_text(const json& v, const std::string& k) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) bad(k, fmt::format("'{}' must be a string or a list of text parts; got {}", k, v.dump()));
  std::string text;
  for (size_t i = 0; i < v.size(); ++i) {
    const json& part = v[i];
    const std::string at = fmt::format("{}[{}]", k, i);
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
      bad(at, fmt::format("'{}' must be {{\"type\": \"text\", \"text\": \"...\"}} (only text is supported); got {}", at,
                          part.dump()));
    text += part["text"].get<std::string>();
  }
  return text;
}

std::vector<ChatMessage> messages_field(const json& v) {
  if (!v.is_array() || v.empty()) bad("messages", "'messages' must be a non-empty list of {\"role\", \"content\"}");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string at = fmt::format("messages[{}]", i);
    const json& m = v[i];
    if (!m.is_object()) bad(at, fmt::format("'{}' must be an object with \"role\" and \"content\"", at));
    if (!m.contains("role") || !m["role"].is_string())
      bad(at + ".role", fmt::format("'{}.role' must be a string (system, user or assistant)", at));
    if (!m.contains("content") || m["content"].is_null())
      bad(at + ".content", fmt::format("'{}.content' is missing", at));
    out.push_back({m["role"].get<std::string>(), content_text(m["content"], at + ".content")});
  }
  try {
    check_chat(out);
  } catch (const Error& e) {
    bad("messages", e.what());
  }
  return out;
}

std::vector<std::string> stop_field(const json& v) {
  if (v.is_string()) return {v.get<std::string>()};
  if (!v.is_array() || v.size() > 4) bad("stop", "'stop' must be a string or a list of up to 4 strings");
  std::vector<std::string> out;
  for (const json& s : v) {
    if (!s.is_string()) bad("stop", fmt::format("'stop' must hold strings; got {}", s.dump()));
    out.push_back(s.get<std::string>());
  }
  return out;
}

// A field we do not implement: allowed only with the value that asks for nothing.
void unsupported(const json& body, const char* k, const json& neutral, const char* what) {
  if (!body.contains(k) || body[k].is_null() || body[k] == neutral) return;
  bad(k, fmt::format("'{}' = {} is not supported; allowed: {} ({})", k, body[k].dump(), neutral.dump(), what));
}

void parse_fields(const json& j, ApiEndpoint endpoint, const ApiLimits& limits, OpenAiRequest& r) {
  if (!j.is_object()) bad("", "the request body must be a JSON object");
  auto has = [&](const char* k) { return j.contains(k) && !j[k].is_null(); };
  if (has("model")) {
    if (!j["model"].is_string()) bad("model", "'model' must be a string");
    r.model = j["model"].get<std::string>();
  }
  if (endpoint == ApiEndpoint::kCompletions) {
    if (!has("prompt")) bad("prompt", "'prompt' is required");
    const json& p = j["prompt"];
    if (p.is_array() && p.size() == 1 && p[0].is_string())
      r.prompt = p[0].get<std::string>();
    else if (p.is_string())
      r.prompt = p.get<std::string>();
    else
      bad("prompt", "'prompt' must be a string (or a list of one string)");
  } else {
    if (!has("messages")) bad("messages", "'messages' is required");
    r.messages = messages_field(j["messages"]);
  }
  if (has("max_completion_tokens"))
    r.max_tokens = int_field(j["max_completion_tokens"], "max_completion_tokens", 0, 1 << 24);
  if (has("max_tokens")) r.max_tokens = int_field(j["max_tokens"], "max_tokens", 0, 1 << 24);
  if (has("stop")) r.stop = stop_field(j["stop"]);
  if (has("temperature")) r.temperature = number_field(j["temperature"], "temperature", 0, 2, false);
  if (has("top_p")) r.top_p = number_field(j["top_p"], "top_p", 0, 1, true);
  if (has("top_k")) r.top_k = int_field(j["top_k"], "top_k", 0, INT32_MAX);
  if (has("seed")) {
    const json& s = j["seed"];
    if (!s.is_number_integer()) bad("seed", fmt::format("'seed' must be an integer; got {}", s.dump()));
    r.seed = s.is_number_unsigned() ? s.get<uint64_t>() : uint64_t(s.get<int64_t>());
  }
  if (has("n")) r.n = int_field(j["n"], "n", 1, limits.max_n);
  if (has("stream")) r.stream = bool_field(j["stream"], "stream");
  if (has("stream_options")) {
    const json& so = j["stream_options"];
    if (!so.is_object()) bad("stream_options", "'stream_options' must be an object");
    if (so.contains("include_usage") && !so["include_usage"].is_null())
      r.include_usage = bool_field(so["include_usage"], "stream_options.include_usage");
  }
  if (endpoint == ApiEndpoint::kCompletions) {
    if (has("logprobs")) r.top_logprobs = int_field(j["logprobs"], "logprobs", 0, 5);
    unsupported(j, "echo", false, "the prompt is not echoed");
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
    unsupported(j, "tools", json::array(), "no tool calls");
    unsupported(j, "response_format", json{{"type", "text"}}, "plain text only");
  }
  unsupported(j, "presence_penalty", 0, "no penalties");
  unsupported(j, "frequency_penalty", 0, "no penalties");
  unsupported(j, "logit_bias", json::object(), "no biases");
}

}  // namespace

OpenAiRequest parse_openai_request(const std::string& body, ApiEndpoint endpoint, const ApiLimits& limits) {
  OpenAiRequest r;
  r.endpoint = endpoint;
  try {
    const json j = parse_json(body, "the request body");
    parse_fields(j, endpoint, limits, r);
  } catch (const FieldError& e) {
    r.error = e.message;
    r.error_param = e.param;
  } catch (const Error& e) {
    r.error = e.what();
  }
  return r;
}

std::vector<TextRequest> openai_text_requests(OpenAiRequest& r, const Tokenizer& tok, const ZayaConfig& c,
                                              int64_t context, const ApiLimits& limits) {
  TextRequest t;
  t.stop_strings = r.stop;
  t.generation.stop_ids = default_stop_ids(tok, c);
  std::string param = "prompt";
  if (r.endpoint == ApiEndpoint::kChat) {
    param = "messages";
    const ChatEncoding e = encode_chat(tok, r.messages, true);
    t.prompt = render_chat(r.messages, true);
    t.generation.prompt = e.ids;
    const ChatStop stop = chat_stop(tok);
    for (int32_t id : stop.ids)
      if (std::find(t.generation.stop_ids.begin(), t.generation.stop_ids.end(), id) == t.generation.stop_ids.end())
        t.generation.stop_ids.push_back(id);
    for (const std::string& s : stop.strings) t.stop_strings.push_back(s);
  } else {
    t.prompt = r.prompt;
    t.generation.prompt = encode_prompt(tok, r.prompt, true);
  }
  const int64_t want = r.max_tokens >= 0                  ? r.max_tokens
                       : r.endpoint == ApiEndpoint::kChat ? limits.default_max_tokens
                                                          : 16;
  const int64_t room = context - int64_t(t.generation.prompt.size());
  t.generation.max_new_tokens = std::max<int64_t>(0, std::min(want, room));
  t.generation.sampling.temperature = r.temperature;
  t.generation.sampling.top_p = r.top_p;
  t.generation.sampling.top_k = r.top_k;
  t.generation.sampling.seed = r.seed;
  const std::string why = generation_request_error(t.generation, c, context);
  if (!why.empty()) {
    r.error = fmt::format("'{}': {}", param, why);
    r.error_param = param;
    return {};
  }
  return repeat_with_seeds(t, r.n);
}

}  // namespace zaya
