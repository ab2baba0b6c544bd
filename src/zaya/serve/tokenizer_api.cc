#include "zaya/serve/tokenizer_api.h"

#include <fmt/format.h>

#include <algorithm>

namespace zaya {
namespace {

// SentencePiece's piece types (data/tokenizer.h): 2 unknown, 3 control.
constexpr int32_t kUnknownPiece = 2, kControlPiece = 3;

// The text of a special id, or null where the tokenizer has none (id -1).
ojson token_text(const Tokenizer& tok, int32_t id) { return id >= 0 ? ojson(tok.id_to_piece(id)) : ojson(); }
ojson token_id(int32_t id) { return id >= 0 ? ojson(id) : ojson(); }

}  // namespace

SpecialTokenEncoder::SpecialTokenEncoder(const Tokenizer& tok) : tok_(tok) {
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    const int32_t type = tok.piece_type(id);
    if (type != kUnknownPiece && type != kControlPiece) continue;
    std::string text = tok.id_to_piece(id);
    if (text.empty() || by_text_.count(text)) continue;
    by_text_.emplace(text, id);
    starts_[static_cast<unsigned char>(text[0])] = true;
    if (std::find(lengths_.begin(), lengths_.end(), text.size()) == lengths_.end()) lengths_.push_back(text.size());
    specials_.emplace_back(std::move(text), id);
  }
  std::sort(lengths_.rbegin(), lengths_.rend());
}

std::vector<int32_t> SpecialTokenEncoder::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  size_t plain = 0;  // start of the text not yet encoded
  const auto flush = [&](size_t end) {
    if (end > plain)
      for (int32_t id : tok_.encode(text.substr(plain, end - plain))) ids.push_back(id);
  };
  for (size_t at = 0; at < text.size();) {
    size_t matched = 0;
    if (starts_[static_cast<unsigned char>(text[at])])
      for (size_t len : lengths_) {  // longest first: "<start_of_turn>" before a shorter special it starts with
        if (len > text.size() - at) continue;
        const auto it = by_text_.find(std::string(text.substr(at, len)));
        if (it == by_text_.end()) continue;
        flush(at);
        ids.push_back(it->second);
        matched = len;
        break;
      }
    if (matched == 0) {
      ++at;
      continue;
    }
    at += matched;
    plain = at;
  }
  flush(text.size());
  return ids;
}

ojson tokenize_response(const Tokenizer& tok, const SpecialTokenEncoder& encoder, const TokenizeRequest& r,
                        int64_t context) {
  std::vector<int32_t> ids;
  if (r.add_special_tokens && tok.bos_id() >= 0) ids.push_back(tok.bos_id());
  for (int32_t id : encoder.encode(r.text)) ids.push_back(id);
  ojson j = {{"count", ids.size()}, {"max_model_len", context}, {"tokens", ids}};
  if (r.return_token_strs) {
    ojson strs = ojson::array();
    for (int32_t id : ids) strs.push_back(tok.id_to_piece(id));
    j["token_strs"] = strs;
  }
  return j;
}

std::string detokenize_error(const Tokenizer& tok, const std::vector<int32_t>& tokens) {
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] >= tok.vocab_size())
      return fmt::format("'tokens[{}]' = {} is outside the tokenizer's vocabulary 0..{}", i, tokens[i],
                         tok.vocab_size() - 1);
  return "";
}

// Control ids decode to nothing (data/tokenizer.h), as Hugging Face's
// decode(skip_special_tokens=True); the harness decodes only for logging.
ojson detokenize_response(const Tokenizer& tok, const std::vector<int32_t>& tokens) {
  return {{"prompt", tok.decode(tokens)}};
}

ojson tokenizer_info(const Tokenizer& tok, int64_t context) {
  return {{"tokenizer_class", "SentencePiece"},
          {"bos_token", token_text(tok, tok.bos_id())},
          {"eos_token", token_text(tok, tok.eos_id())},
          {"pad_token", token_text(tok, tok.pad_id())},
          {"unk_token", token_text(tok, tok.unk_id())},
          {"bos_token_id", token_id(tok.bos_id())},
          {"eos_token_id", token_id(tok.eos_id())},
          {"pad_token_id", token_id(tok.pad_id())},
          {"unk_token_id", token_id(tok.unk_id())},
          {"vocab_size", tok.vocab_size()},
          {"model_max_length", context},
          {"add_bos_token", tok.bos_id() >= 0}};
}

}  // namespace zaya
