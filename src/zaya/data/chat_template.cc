#include "zaya/data/chat_template.h"

#include <fmt/format.h>

#include "zaya/core/error.h"
#include "zaya/data/python_json.h"

namespace zaya {
namespace {

// Jinja's `trim`: surrounding whitespace removed.
std::string trimmed(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  const size_t a = s.find_first_not_of(ws);
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(ws) - a + 1);
}

// One piece of a rendered conversation: a marker or text, and whether the model wrote it.
struct Piece {
  bool marker = false;
  std::string text;
  bool by_model = false;
};

class Pieces {
 public:
  void marker(const char* m, bool model = false) { out_.push_back({true, m, model}); }
  void text(std::string t, bool model = false) {
    if (!t.empty()) out_.push_back({false, std::move(t), model});
  }
  std::vector<Piece> take() { return std::move(out_); }

 private:
  std::vector<Piece> out_;
};

std::vector<Piece> gemma3_pieces(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  Pieces out;
  size_t first = 0;
  std::string prefix;
  if (messages[0].role == "system") {
    prefix = messages[0].content + "\n\n";  // not trimmed, as the template's first_user_prefix
    first = 1;
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const bool model = messages[i].role == "assistant";
    out.marker(kStartOfTurn);
    out.text(model ? "model\n" : messages[i].role + "\n");
    out.text((i == first ? prefix : "") + trimmed(messages[i].content), model);
    out.marker(kEndOfTurn, model);
    out.text("\n");
  }
  if (add_generation_prompt) {
    out.marker(kStartOfTurn);
    out.text("model\n");
  }
  return out.take();
}

// The system turn's tools block: the tools as JSON lines, and how to call one.
void zaya_tools(const ChatFormatSpec& s, const std::vector<ChatTool>& tools, Pieces& out) {
  std::string list =
      "# Tools\n\nYou may call one or more functions to help with the request. The functions you can call are "
      "listed as JSON within <tools></tools>:\n<tools>";
  for (const ChatTool& t : tools) {
    list += '\n';
    list += python_json(t.entry);
  }
  list += "\n</tools>\n\nTo call a function, reply with exactly this format and nothing after it:\n";
  out.text(std::move(list));
  out.marker(s.tool_call_open);
  out.text("\n<function=FUNCTION_NAME>\n<parameter=PARAMETER_NAME>\nvalue\n</parameter>\n</function>\n");
  out.marker(s.tool_call_close);
}

void zaya_assistant(const ChatFormatSpec& s, const ChatMessage& m, Pieces& out) {
  out.marker(s.turn_start);
  out.text(std::string(s.assistant_role) + "\n");
  out.marker(s.think_open);
  out.text("\n");
  out.text(m.reasoning + "\n", true);
  out.marker(s.think_close, true);
  out.text("\n\n" + m.content, true);
  for (size_t k = 0; k < m.tool_calls.size(); ++k) {
    if (k > 0 || !m.content.empty()) out.text("\n", true);
    out.marker(s.tool_call_open, true);
    std::string body = "\n<function=" + m.tool_calls[k].name + ">\n";
    for (const auto& [name, value] : m.tool_calls[k].arguments.items())
      body += "<parameter=" + name + ">\n" + python_str(value) + "\n</parameter>\n";
    out.text(body + "</function>\n", true);
    out.marker(s.tool_call_close, true);
  }
  out.marker(s.turn_end, true);
  out.text("\n");
}

std::vector<Piece> zaya_pieces(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                               const ChatOptions& o) {
  const ChatFormatSpec& s = chat_format_spec(ChatFormat::kZaya);
  Pieces out;
  size_t first = 0;
  if (messages[0].role == "system" || !o.tools.empty()) {
    out.marker(s.turn_start);
    std::string system = "system\n";
    if (messages[0].role == "system") {
      system += messages[0].content;
      first = 1;
    }
    if (!o.tools.empty() && first == 1 && !messages[0].content.empty()) system += "\n\n";
    out.text(std::move(system));
    if (!o.tools.empty()) zaya_tools(s, o.tools, out);
    out.marker(s.turn_end);
    out.text("\n");
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "assistant") {
      zaya_assistant(s, m, out);
    } else if (m.role == "tool") {
      if (i == first || messages[i - 1].role != "tool") {
        out.marker(s.turn_start);
        out.text("user\n");
      }
      out.marker(s.tool_response_open);
      out.text("\n" + m.content + "\n");
      out.marker(s.tool_response_close);
      out.text("\n");
      if (i + 1 == messages.size() || messages[i + 1].role != "tool") {
        out.marker(s.turn_end);
        out.text("\n");
      }
    } else {
      out.marker(s.turn_start);
      out.text(m.role + "\n" + m.content);
      out.marker(s.turn_end);
      out.text("\n");
    }
  }
  if (add_generation_prompt) {
    out.marker(s.turn_start);
    out.text(std::string(s.assistant_role) + "\n");
    out.marker(s.think_open);
    out.text("\n");
    if (!o.enable_thinking || o.forced_tool) {
      out.text("\n");
      out.marker(s.think_close);
      out.text("\n\n");
    }
    if (o.forced_tool) {
      out.marker(s.tool_call_open);
      out.text("\n<function=" + (o.forced_tool->empty() ? std::string() : *o.forced_tool + ">\n"));
    }
  }
  return out.take();
}

std::vector<Piece> chat_pieces(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                               const ChatOptions& o) {
  check_chat(messages, o.format);
  if (o.format == ChatFormat::kZaya) return zaya_pieces(messages, add_generation_prompt, o);
  ZAYA_CHECK(o.tools.empty() && !o.forced_tool, "tools: the chat format gemma3 has no tool calls");
  return gemma3_pieces(messages, add_generation_prompt);
}

}  // namespace

std::string render_chat(const std::vector<ChatMessage>& messages, bool add_generation_prompt, const ChatOptions& o) {
  std::string out;
  for (const Piece& p : chat_pieces(messages, add_generation_prompt, o)) out += p.text;
  return out;
}

int32_t special_piece_id(const Tokenizer& tok, const std::string& piece) {
  const int32_t id = tok.piece_to_id(piece);
  if (id < 0 || id >= tok.vocab_size() || id == tok.unk_id()) return -1;
  return tok.id_to_piece(id) == piece ? id : -1;
}

ChatEncoding encode_chat(const Tokenizer& tok, const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                         const ChatOptions& o) {
  const ChatFormatSpec& s = chat_format_spec(o.format);
  ChatEncoding e;
  e.special_markers = special_piece_id(tok, s.turn_start) >= 0 && special_piece_id(tok, s.turn_end) >= 0;
  e.ids.push_back(tok.bos_id());
  e.by_model.push_back(0);
  for (const Piece& p : chat_pieces(messages, add_generation_prompt, o)) {
    const int32_t id = p.marker && e.special_markers ? special_piece_id(tok, p.text) : -1;
    if (id >= 0) {
      e.ids.push_back(id);
      e.by_model.push_back(p.by_model ? 1 : 0);
      continue;
    }
    for (int32_t t : tok.encode(p.text)) {
      e.ids.push_back(t);
      e.by_model.push_back(p.by_model ? 1 : 0);
    }
  }
  return e;
}

ChatStop chat_stop(const Tokenizer& tok, ChatFormat format) {
  const ChatFormatSpec& s = chat_format_spec(format);
  const int32_t start = special_piece_id(tok, s.turn_start), end = special_piece_id(tok, s.turn_end);
  if (start >= 0 && end >= 0) return {{end}, {}};
  return {{}, {s.turn_end}};
}

}  // namespace zaya
