#include "zaya/data/chat_template.h"

#include <fmt/format.h>

#include "zaya/core/error.h"

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

std::vector<Piece> chat_pieces(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  check_chat(messages);
  std::vector<Piece> out;
  size_t first = 0;
  std::string prefix;
  if (messages[0].role == "system") {
    prefix = trimmed(messages[0].content) + "\n\n";
    first = 1;
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const bool model = messages[i].role == "assistant";
    out.push_back({true, kStartOfTurn, false});
    out.push_back({false, model ? "model\n" : messages[i].role + "\n", false});
    std::string text = (i == first ? prefix : "") + trimmed(messages[i].content);
    if (!text.empty()) out.push_back({false, std::move(text), model});
    out.push_back({true, kEndOfTurn, model});
    out.push_back({false, "\n", false});
  }
  if (add_generation_prompt) {
    out.push_back({true, kStartOfTurn, false});
    out.push_back({false, "model\n", false});
  }
  return out;
}

}  // namespace

std::string render_chat(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string out;
  for (const Piece& p : chat_pieces(messages, add_generation_prompt)) out += p.text;
  return out;
}

int32_t special_piece_id(const Tokenizer& tok, const std::string& piece) {
  const int32_t id = tok.piece_to_id(piece);
  if (id < 0 || id >= tok.vocab_size() || id == tok.unk_id()) return -1;
  return tok.id_to_piece(id) == piece ? id : -1;
}

ChatEncoding encode_chat(const Tokenizer& tok, const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  const int32_t start = special_piece_id(tok, kStartOfTurn), end = special_piece_id(tok, kEndOfTurn);
  ChatEncoding e;
  e.special_markers = start >= 0 && end >= 0;
  e.ids.push_back(tok.bos_id());
  e.by_model.push_back(0);
  for (const Piece& p : chat_pieces(messages, add_generation_prompt)) {
    if (p.marker && e.special_markers) {
      e.ids.push_back(p.text == kStartOfTurn ? start : end);
      e.by_model.push_back(p.by_model ? 1 : 0);
      continue;
    }
    for (int32_t id : tok.encode(p.text)) {
      e.ids.push_back(id);
      e.by_model.push_back(p.by_model ? 1 : 0);
    }
  }
  return e;
}

ChatStop chat_stop(const Tokenizer& tok) {
  const int32_t start = special_piece_id(tok, kStartOfTurn), end = special_piece_id(tok, kEndOfTurn);
  if (start >= 0 && end >= 0) return {{end}, {}};
  return {{}, {kEndOfTurn}};
}

}  // namespace zaya
