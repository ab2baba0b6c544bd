#include "zaya/data/sft_example.h"

#include <algorithm>

#include <fmt/format.h>

#include "zaya/core/error.h"
#include "zaya/data/chat_json.h"

namespace zaya {
namespace {

// j[key] as a string; `where` names j in messages ("messages[2]"; empty: the line's object).
std::string string_field(const nlohmann::json& j, const char* key, const std::string& where) {
  const auto it = j.find(key);
  ZAYA_CHECK(it != j.end(), "{} has no \"{}\"", where.empty() ? "the object" : where, key);
  ZAYA_CHECK(it->is_string(), "{} is a JSON {}, expected a string",
             where.empty() ? fmt::format("\"{}\"", key) : fmt::format("{}.{}", where, key), it->type_name());
  return it->get<std::string>();
}

// One message; in the zaya format also an assistant's reasoning_content and
// tool_calls (its content may then be null) and a tool message's tool_call_id.
ChatMessage parse_message(const nlohmann::json& m, const std::string& where, ChatFormat format) {
  ZAYA_CHECK(m.is_object(), "{} is a JSON {}, expected an object with \"role\" and \"content\"", where, m.type_name());
  ChatMessage out;
  out.role = string_field(m, "role", where);
  if (format == ChatFormat::kZaya && out.role == "assistant") {
    if (m.contains("tool_calls") && !m["tool_calls"].is_null())
      out.tool_calls = read_tool_calls(m["tool_calls"], where + ".tool_calls");
    if (m.contains("reasoning_content") && !m["reasoning_content"].is_null())
      out.reasoning = string_field(m, "reasoning_content", where);
    if (!out.tool_calls.empty() && (!m.contains("content") || m["content"].is_null())) return out;
  }
  if (format == ChatFormat::kZaya && out.role == "tool" && m.contains("tool_call_id"))
    out.tool_call_id = string_field(m, "tool_call_id", where);
  out.content = string_field(m, "content", where);
  return out;
}

std::vector<ChatMessage> parse_messages(const nlohmann::json& j, ChatFormat format) {
  const nlohmann::json& m = j["messages"];
  ZAYA_CHECK(m.is_array(), "\"messages\" is a JSON {}, expected an array of {{\"role\", \"content\"}} objects",
             m.type_name());
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < m.size(); ++i) out.push_back(parse_message(m[i], fmt::format("messages[{}]", i), format));
  check_chat(out, format);  // before the system prompt goes in front: the indices are the file's
  if (j.contains("system")) {
    const nlohmann::json& s = j["system"];
    ZAYA_CHECK(s.is_string(), "\"system\" is a JSON {}, expected a string", s.type_name());
    ZAYA_CHECK(out[0].role != "system",
               "\"system\" is set and messages[0] is a system message too; give the system prompt once");
    out.insert(out.begin(), ChatMessage{"system", s.get<std::string>()});
  }
  return out;
}

}  // namespace

LossOn parse_loss_on(const std::string& name) {
  if (name == "assistant") return LossOn::kAssistant;
  if (name == "last-assistant") return LossOn::kLastAssistant;
  if (name == "all") return LossOn::kAll;
  fail("loss-on '{}' is not known; allowed: assistant, last-assistant, all", name);
}

const char* loss_on_name(LossOn loss_on) {
  switch (loss_on) {
    case LossOn::kAssistant: return "assistant";
    case LossOn::kLastAssistant: return "last-assistant";
    case LossOn::kAll: return "all";
  }
  return "assistant";
}

PairFormat parse_pair_format(const std::string& name) {
  if (name == "text") return PairFormat::kText;
  if (name == "chat") return PairFormat::kChat;
  fail("pair format '{}' is not known; allowed: text, chat", name);
}

SftExample parse_sft_example(const nlohmann::json& j, PairFormat pairs, ChatFormat format) {
  ZAYA_CHECK(j.is_object(),
             "the line is a JSON {}, expected an object with \"messages\" or \"prompt\" and "
             "\"completion\"",
             j.type_name());
  const bool conversation = j.contains("messages");
  const bool pair = j.contains("prompt") || j.contains("completion");
  ZAYA_CHECK(conversation || pair, "the object has neither \"messages\" nor \"prompt\" and \"completion\"");
  ZAYA_CHECK(!(conversation && pair), "the object has both \"messages\" and \"prompt\"/\"completion\"; give one");
  SftExample e;
  e.format = format;
  if (j.contains("tools") && !j["tools"].is_null()) {
    ZAYA_CHECK(format == ChatFormat::kZaya,
               "\"tools\" is set, but the chat format {} has no tool calls (--chat-format "
               "zaya has)",
               enum_name<ChatFormat>(kChatFormatNames, format));
    e.tools = read_chat_tools(j["tools"], 4096);
  }
  if (conversation) {
    e.messages = parse_messages(j, format);
    return e;
  }
  ZAYA_CHECK(!j.contains("system") || pairs == PairFormat::kChat,
             "\"system\" is set on a plain-text prompt/completion pair, which has no system turn (use messages, or "
             "--pairs chat)");
  e.prompt = string_field(j, "prompt", "");
  e.completion = string_field(j, "completion", "");
  ZAYA_CHECK(!e.completion.empty(), "\"completion\" is empty; nothing to learn from");
  if (pairs == PairFormat::kChat) {
    nlohmann::json chat = {
        {"messages", {{{"role", "user"}, {"content", e.prompt}}, {{"role", "assistant"}, {"content", e.completion}}}}};
    if (j.contains("system")) chat["system"] = j["system"];
    e.messages = parse_messages(chat, format);
  } else {
    e.text_pair = true;
  }
  return e;
}

SftDocument encode_sft_example(const Tokenizer& tok, const SftExample& e, LossOn loss_on) {
  SftDocument d;
  if (e.text_pair) {
    const std::vector<int32_t> prompt = tok.encode(e.prompt), completion = tok.encode(e.completion);
    d.tokens.push_back(tok.bos_id());
    d.tokens.insert(d.tokens.end(), prompt.begin(), prompt.end());
    d.tokens.insert(d.tokens.end(), completion.begin(), completion.end());
    d.tokens.push_back(tok.eos_id());
    // The completion and the eos that ends it (how the model learns to stop).
    d.mask.assign(d.tokens.size(), 0);
    std::fill(d.mask.begin() + static_cast<std::ptrdiff_t>(1 + prompt.size()), d.mask.end(), uint8_t{1});
  } else {
    ChatOptions chat;
    chat.format = e.format;
    chat.tools = e.tools;
    ChatEncoding c = encode_chat(tok, e.messages, false, chat);
    d.tokens = std::move(c.ids);
    d.tokens.push_back(tok.eos_id());
    d.mask = std::move(c.by_model);
    d.mask.push_back(0);
    if (loss_on == LossOn::kLastAssistant) {
      // Each assistant turn is one run of model tokens (its text and
      // <end_of_turn>; the "\n" after it is not the model's): keep the last run.
      size_t end = d.mask.size();
      while (end > 0 && d.mask[end - 1] == 0) --end;
      size_t begin = end;
      while (begin > 0 && d.mask[begin - 1] != 0) --begin;
      std::fill(d.mask.begin(), d.mask.begin() + static_cast<std::ptrdiff_t>(begin), uint8_t{0});
    }
  }
  if (loss_on == LossOn::kAll) std::fill(d.mask.begin(), d.mask.end(), uint8_t{1});
  ZAYA_CHECK(std::count(d.mask.begin(), d.mask.end(), uint8_t{1}) > 0,
             "no token counts for the loss (--loss-on {}): the conversation has no assistant message",
             loss_on_name(loss_on));
  return d;
}

}  // namespace zaya
