#pragma once
// ZAYA1's chat format: Gemma 3's chat template (ZAYA1 uses the Gemma 3
// tokenizer), one implementation for every caller: the server's chat
// completions and the rendering of chat data for fine-tuning.
//
//   <bos><start_of_turn>user\n{system}\n\n{user}<end_of_turn>\n
//   <start_of_turn>model\n{assistant}<end_of_turn>\n
//   <start_of_turn>model\n                       (the generation prompt)
//
// As in google/gemma-3-*-it's tokenizer_config.json: a first "system" message
// has no turn of its own (its text and a blank line open the first user turn);
// "assistant" is spelled "model"; every message's text is trimmed of
// surrounding whitespace; after the optional system message the roles must
// alternate user, assistant, user, ... In the Gemma 3 vocabulary
// <start_of_turn> is id 105 and <end_of_turn> id 106 (BOS 2, EOS 1), and a
// model turn ends with <end_of_turn>.
//
// The markers are encoded as their ids when the tokenizer has them as pieces
// and the text between them is encoded on its own (as Hugging Face's tokenizer
// splits at special tokens). A tokenizer without them (the tokenizers `zaya
// data tokenizer` trains) gets the same text, the markers spelled as ordinary
// text: the plain fallback; a model turn's end is then the stop string
// "<end_of_turn>" rather than a stop id (chat_stop).

#include <cstdint>
#include <string>
#include <vector>

#include "zaya/data/tokenizer.h"

namespace zaya {

struct ChatMessage {
  std::string role;  // "system" (first message only), "user" or "assistant"
  std::string content;
};

inline constexpr const char* kStartOfTurn = "<start_of_turn>";
inline constexpr const char* kEndOfTurn = "<end_of_turn>";

// Fails naming the message ("messages[2].role ...") when the conversation does
// not fit the template: no message, a system message alone, an unknown role,
// a system message after the first, or roles that do not alternate starting with "user".
void check_chat(const std::vector<ChatMessage>& messages);

// The template's text, without the BOS token; with `add_generation_prompt`
// it ends with the opening of a model turn.
std::string render_chat(const std::vector<ChatMessage>& messages, bool add_generation_prompt);

struct ChatEncoding {
  std::vector<int32_t> ids;       // BOS first
  std::vector<uint8_t> by_model;  // per id: 1 for the text of a model turn and the <end_of_turn> that closes it
  bool special_markers = false;   // the markers are single ids (else the plain fallback)
};

// The ids of render_chat's text (BOS first), markers as single ids where the tokenizer has them.
ChatEncoding encode_chat(const Tokenizer& tokenizer, const std::vector<ChatMessage>& messages,
                         bool add_generation_prompt);

// How a generated model turn ends: the <end_of_turn> id, or (plain fallback)
// the string "<end_of_turn>".
struct ChatStop {
  std::vector<int32_t> ids;
  std::vector<std::string> strings;
};
ChatStop chat_stop(const Tokenizer& tokenizer);

// The id of `piece` when the tokenizer has it as a piece of its own, else -1.
int32_t special_piece_id(const Tokenizer& tokenizer, const std::string& piece);

}  // namespace zaya
