#pragma once
// Fine-tuning examples (docs/training.md, "Fine-tuning"): one JSON object per
// JSONL line, rendered into the tokens of one shard document and the loss
// mask that says which of them count (loss_mask.h). Two schemas:
//
//   {"messages": [{"role": "user", "content": "..."}, {"role": "assistant", "content": "..."}, ...],
//    "system": "..."}                              (optional; or a first message with role "system")
//   {"prompt": "...", "completion": "..."}
//
// A conversation is rendered with the chat format chosen (chat_template.h:
// gemma3, ZAYA1-base's, by default; zaya, ZAYA1-8B's, with reasoning and tool
// calls) and framed as [bos] chat [eos]. A prompt/completion pair
// is plain text, [bos] prompt completion [eos], the prompt and the completion
// encoded on their own (as `zaya generate` encodes a prompt and continues it),
// or, with PairFormat::kChat, the conversation [user: prompt, assistant:
// completion]. Other keys of the object (an "id", ...) and of a message are
// ignored.
//
// Which tokens count (LossOn): kAssistant, every assistant turn's text and
// the <end_of_turn> that closes it (the completion and the eos of a text
// pair); kLastAssistant, only the last assistant turn; kAll, every token, as
// pretraining does. An example in which nothing counts is refused.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "zaya/data/chat_template.h"
#include "zaya/data/tokenizer.h"

namespace zaya {

enum class LossOn { kAssistant, kLastAssistant, kAll };
// "assistant", "last-assistant" or "all"; fails naming the allowed values.
LossOn parse_loss_on(const std::string& name);
const char* loss_on_name(LossOn loss_on);

enum class PairFormat { kText, kChat };
// "text" or "chat"; fails naming the allowed values.
PairFormat parse_pair_format(const std::string& name);

struct SftOptions {
  LossOn loss_on = LossOn::kAssistant;
  PairFormat pairs = PairFormat::kText;
  ChatFormat format = ChatFormat::kGemma3;  // --chat-format: how conversations are rendered
};

struct SftExample {
  std::vector<ChatMessage> messages;  // a conversation, or a pair in chat form
  std::vector<ChatTool> tools;        // zaya format: the example's "tools", listed in its system turn
  ChatFormat format = ChatFormat::kGemma3;
  bool text_pair = false;  // a plain-text prompt/completion pair
  std::string prompt, completion;
};

// The example of one JSONL object; fails naming the field ("messages[1].content
// is a JSON number, expected a string"). The caller prefixes FILE: line N.
// In the zaya format a message may also carry "reasoning_content", "tool_calls"
// and "tool_call_id" (OpenAI's shapes), roles include "tool", and the object a
// "tools" list (chat_json.h checks it), as the server takes them.
SftExample parse_sft_example(const nlohmann::json& j, PairFormat pairs, ChatFormat format = ChatFormat::kGemma3);

struct SftDocument {
  std::vector<int32_t> tokens;  // bos first, eos last
  std::vector<uint8_t> mask;    // per token: 1 when it counts for the loss
};

// The tokens and loss mask of `example`; fails when no token counts.
SftDocument encode_sft_example(const Tokenizer& tokenizer, const SftExample& example, LossOn loss_on);

}  // namespace zaya
