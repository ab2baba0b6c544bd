#pragma once
// The chat formats zaya renders (chat_template.h), as data chosen per model
// (docs/serve.md, "Chat formats"):
//
//   gemma3  Gemma 3's turns (<start_of_turn>user ... <end_of_turn>): ZAYA1-base
//           and every model zaya trains with the Gemma 3 tokenizer.
//   zaya    ZAYA1-8B's: <|im_start|>ROLE\n...<|im_end|> turns (Gemma 3 ids
//           105/106), a <think>...</think> block opening each assistant turn,
//           tool calls in <zyphra_tool_call> (ids 101-104), tool results as a
//           user turn of <zyphra_tool_response> blocks.
//
// A model's format comes from its chat template (a GGUF file's
// tokenizer.chat_template, tokenizer_config.json's "chat_template", or
// chat_template.jinja beside the model), recognised by the
// markers it writes; `--chat-format` overrides it, and a template zaya does
// not know is an error that names the file and the flag. A model with no
// template (zaya's own checkpoints) is gemma3.
//
// Every string of a format (the markers, the tools preamble) is one row of
// ChatFormatSpec, so a fact that turns out different in the real template
// is changed in one place (chat_format.cc) and the differential test
// (tests/chat_templates) says whether the renderer still matches.

#include <optional>
#include <string>

#include "zaya/core/enum_names.h"

namespace zaya {

enum class ChatFormat { kGemma3, kZaya };
inline constexpr EnumName<ChatFormat> kChatFormatNames[] = {{ChatFormat::kGemma3, "gemma3"},
                                                            {ChatFormat::kZaya, "zaya"}};

// The strings a format writes. Gemma 3 uses turn_start/turn_end and spells the
// assistant "model"; the rest are ZAYA1-8B's.
struct ChatFormatSpec {
  const char* turn_start;
  const char* turn_end;
  const char* assistant_role;
  const char* think_open;
  const char* think_close;
  const char* tool_call_open;
  const char* tool_call_close;
  const char* tool_response_open;
  const char* tool_response_close;
};
const ChatFormatSpec& chat_format_spec(ChatFormat format);

// The format a chat template's text is written for (by its markers), or none.
std::optional<ChatFormat> recognise_chat_template(const std::string& chat_template);

// The chat template of a model: FILE.gguf's "tokenizer.chat_template"
// metadata; else, beside the model (a directory, a checkpoint, or the GGUF
// file's directory), tokenizer_config.json's "chat_template" (a string, or the
// entry named "default" of a list), else chat_template.jinja; none when there
// is none. `where` is set to the file (and key) it came from.
std::optional<std::string> model_chat_template(const std::string& model_path, std::string* where = nullptr);

// The format to render `model_path`'s chats in: `override_name` when given
// (gemma3 or zaya; else an error naming --chat-format), else its template's,
// else gemma3. A template zaya does not recognise is an error naming the file
// and the way out (--chat-format). `source` says which rule chose it.
ChatFormat model_chat_format(const std::string& model_path, const std::string& override_name,
                             std::string* source = nullptr);

}  // namespace zaya
