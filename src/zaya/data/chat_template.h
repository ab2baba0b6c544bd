#pragma once
// The chat formats (chat_format.h) rendered, one implementation for every
// caller: the server's chat completions and the rendering of chat data for
// fine-tuning (`zaya data sft`), so training and serving cannot drift.
//
// gemma3 (google/gemma-3-*-it's template):
//   <bos><start_of_turn>user\n{system}\n\n{user}<end_of_turn>\n
//   <start_of_turn>model\n{assistant}<end_of_turn>\n
//   <start_of_turn>model\n                       (the generation prompt)
// A first "system" message has no turn of its own (its text and a blank line
// open the first user turn); "assistant" is spelled "model"; every message's
// text is trimmed of surrounding whitespace (the system text is not); after
// the optional system message the roles must alternate user, assistant, ...
// No tools, no reasoning. In the Gemma 3 vocabulary <start_of_turn> is id 105
// and <end_of_turn> id 106 (BOS 2, EOS 1).
//
// zaya (ZAYA1-8B; the template in tests/chat_templates/zaya.jinja, written
// from the facts in docs/serve.md "Chat formats", not read from the hub):
//   <bos><|im_start|>system\n{system}[\n\n# Tools ... <tools>{tool json per line}</tools> ...]<|im_end|>\n
//   <|im_start|>user\n{user}<|im_end|>\n
//   <|im_start|>assistant\n<think>\n{reasoning}\n</think>\n\n{content}[\n]<zyphra_tool_call>\n
//     <function=NAME>\n<parameter=P>\n{value}\n</parameter>\n</function>\n</zyphra_tool_call><|im_end|>\n
//   <|im_start|>user\n<zyphra_tool_response>\n{tool result}\n</zyphra_tool_response>\n...<|im_end|>\n
//   <|im_start|>assistant\n<think>\n            (thinking on; off: <think>\n\n</think>\n\n)
// Consecutive tool messages share one user turn. Texts are not trimmed.
//
// The markers are encoded as their ids when the tokenizer has them as pieces
// and the text between them is encoded on its own (as Hugging Face's tokenizer
// splits at special tokens). A tokenizer without the turn markers (the
// tokenizers `zaya data tokenizer` trains) gets the same text, the markers
// spelled as ordinary text: the plain fallback; a turn's end is then a stop
// string rather than a stop id (chat_stop).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "zaya/data/chat_format.h"
#include "zaya/data/tokenizer.h"

namespace zaya {

// A call an assistant message made (zaya format).
struct ToolCall {
  std::string id;
  std::string name;
  nlohmann::ordered_json arguments = nlohmann::ordered_json::object();  // an object
};

struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(std::string r, std::string c) : role(std::move(r)), content(std::move(c)) {}
  std::string role;  // "system" (first message only), "user", "assistant", "tool" (zaya)
  std::string content;
  std::string reasoning;             // assistant (zaya): its think block's text (reasoning_content)
  std::vector<ToolCall> tool_calls;  // assistant (zaya)
  std::string tool_call_id;          // tool
};

// A tool a request offers: {"type": "function", "function": {"name", "description", "parameters"}}.
struct ChatTool {
  std::string name;
  nlohmann::ordered_json entry;       // the whole entry as given (rendered as JSON)
  nlohmann::ordered_json parameters;  // the function's JSON schema ({} when none)
};

struct ChatOptions {
  ChatFormat format = ChatFormat::kGemma3;
  bool enable_thinking = true;  // zaya: the generation prompt opens the think block (false: closes it empty)
  std::vector<ChatTool> tools;  // zaya: listed in the system turn
  // zaya: the generation prompt goes on with the opening of a call (thinking
  // closed): "<zyphra_tool_call>\n<function=" and, when not empty, "NAME>\n".
  std::optional<std::string> forced_tool;
};

inline constexpr const char* kStartOfTurn = "<start_of_turn>";
inline constexpr const char* kEndOfTurn = "<end_of_turn>";

// Fails naming the message ("messages[2].role ...") when the conversation does
// not fit the format. gemma3: no message, a system message alone, an unknown
// role, a system message after the first, roles that do not alternate starting
// with "user", reasoning or tool calls. zaya: no message besides the system
// one, a system message after the first, a tool message that follows no
// assistant tool call.
void check_chat(const std::vector<ChatMessage>& messages, ChatFormat format = ChatFormat::kGemma3);

// The template's text, without the BOS token; with `add_generation_prompt`
// it ends with the opening of an assistant turn.
std::string render_chat(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                        const ChatOptions& options = {});

struct ChatEncoding {
  std::vector<int32_t> ids;       // BOS first
  std::vector<uint8_t> by_model;  // per id: 1 for what an assistant turn generates, up to its closing marker
  bool special_markers = false;   // the turn markers are single ids (else the plain fallback)
};

// The ids of render_chat's text (BOS first), markers as single ids where the tokenizer has them.
ChatEncoding encode_chat(const Tokenizer& tokenizer, const std::vector<ChatMessage>& messages,
                         bool add_generation_prompt, const ChatOptions& options = {});

// How a generated assistant turn ends: the turn-end id, or (plain fallback)
// the turn-end string.
struct ChatStop {
  std::vector<int32_t> ids;
  std::vector<std::string> strings;
};
ChatStop chat_stop(const Tokenizer& tokenizer, ChatFormat format = ChatFormat::kGemma3);

// The id of `piece` when the tokenizer has it as a piece of its own, else -1.
int32_t special_piece_id(const Tokenizer& tokenizer, const std::string& piece);

}  // namespace zaya
