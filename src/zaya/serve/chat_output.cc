#include "zaya/serve/chat_output.h"

#include <fmt/format.h>

#include <algorithm>

#include "zaya/data/python_json.h"
#include "zaya/io/json_file.h"
#include "zaya/serve/tool_call_xml.h"

namespace zaya {
namespace {

bool output_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string without_trailing_space(const std::string& s) {
  size_t end = s.size();
  while (end > 0 && output_space(s[end - 1])) --end;
  return s.substr(0, end);
}

// The length of the longest end of `s` that is the start of `marker` (not all of it).
size_t partial_marker(const std::string& s, const std::string& marker) {
  for (size_t k = std::min(s.size(), marker.size() - 1); k > 0; --k)
    if (s.compare(s.size() - k, k, marker, 0, k) == 0) return k;
  return 0;
}

// Where the text `s` must be held back from: a partial marker at its end and the whitespace before it.
size_t held_from(const std::string& s, const std::string& marker) {
  size_t end = s.size() - partial_marker(s, marker);
  while (end > 0 && output_space(s[end - 1])) --end;
  return end;
}

}  // namespace

ChatOutputOptions chat_output_options(const ChatOptions& chat, std::string id_prefix) {
  ChatOutputOptions o;
  o.format = chat.format;
  o.id_prefix = std::move(id_prefix);
  if (chat.format != ChatFormat::kZaya) return o;
  o.reasoning = chat.enable_thinking && !chat.forced_tool;
  o.parse_tools = !chat.tools.empty();
  o.tools = chat.tools;
  if (chat.forced_tool)
    o.answer_prefix = std::string(chat_format_spec(chat.format).tool_call_open) +
                      "\n<function=" + (chat.forced_tool->empty() ? std::string() : *chat.forced_tool + ">\n");
  return o;
}

ChatOutputParser::ChatOutputParser(ChatOutputOptions options)
    : o_(std::move(options)),
      spec_(chat_format_spec(o_.format)),
      state_(o_.reasoning ? State::kReasoning : State::kContent),
      pending_(o_.answer_prefix) {}

ChatDelta ChatOutputParser::feed(const std::string& text) {
  ChatDelta d;
  pending_ += text;
  step(d, false);
  return d;
}

ChatDelta ChatOutputParser::finish() {
  ChatDelta d;
  step(d, true);
  return d;
}

void ChatOutputParser::step(ChatDelta& d, bool at_end) {
  const std::string close_think = spec_.think_close, open_call = spec_.tool_call_open,
                    close_call = spec_.tool_call_close;
  for (;;) {
    if (state_ == State::kReasoning) {
      const size_t at = pending_.find(close_think);
      if (at != std::string::npos) {
        d.reasoning += without_trailing_space(pending_.substr(0, at));
        pending_.erase(0, at + close_think.size());
        state_ = State::kContent;
        strip_leading_ = true;
        continue;
      }
      const size_t keep = at_end ? pending_.size() : held_from(pending_, close_think);
      d.reasoning += pending_.substr(0, keep);
      pending_.erase(0, keep);
      return;
    }
    if (state_ == State::kContent) {
      if (strip_leading_) {
        size_t a = 0;
        while (a < pending_.size() && output_space(pending_[a])) ++a;
        pending_.erase(0, a);
        if (pending_.empty()) return;
        strip_leading_ = false;
      }
      if (!o_.parse_tools) {
        d.content += pending_;
        pending_.clear();
        return;
      }
      const size_t at = pending_.find(open_call);
      if (at != std::string::npos) {
        const std::string before = pending_.substr(0, at);
        d.content += without_trailing_space(before);
        space_before_call_ = before.substr(without_trailing_space(before).size());
        pending_.erase(0, at + open_call.size());
        state_ = State::kCall;
        continue;
      }
      const size_t keep = at_end ? pending_.size() : held_from(pending_, open_call);
      d.content += pending_.substr(0, keep);
      pending_.erase(0, keep);
      return;
    }
    const size_t at = pending_.find(close_call);  // State::kCall: the call stays in pending_ until it closes
    if (at == std::string::npos && !at_end) return;
    const std::string block = pending_.substr(0, at);
    pending_.erase(0, at == std::string::npos ? pending_.size() : at + close_call.size());
    state_ = State::kContent;
    end_call(block, at != std::string::npos, d);
    if (at == std::string::npos) return;
  }
}

void ChatOutputParser::end_call(const std::string& block, bool closed, ChatDelta& d) {
  std::string why;
  const std::optional<ParsedToolCall> call = parse_tool_call_xml(block, o_.tools, &why);
  if (!call) {
    const std::string text = std::string(spec_.tool_call_open) + block + (closed ? spec_.tool_call_close : "");
    d.warnings.push_back(fmt::format("the model wrote a malformed tool call ({}{}); it is passed on as content: {}",
                                     why, closed ? "" : ", and it was not closed",
                                     json_preview(nlohmann::json(text), 200)));
    d.content += space_before_call_ + text;
    return;
  }
  for (const std::string& w : call->warnings) d.warnings.push_back(fmt::format("tool call {}: {}", call->name, w));
  const size_t index = size_t(calls_++);
  d.tool_calls.push_back({index, o_.id_prefix + std::to_string(index), call->name, python_json(call->arguments)});
}

}  // namespace zaya
