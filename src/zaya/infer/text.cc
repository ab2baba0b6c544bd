#include "zaya/infer/text.h"

#include <fmt/format.h>

#include <filesystem>

#include "zaya/core/error.h"
#include "zaya/data/tokenizer_gguf.h"
#include "zaya/io/utf8.h"

namespace zaya {

int64_t check_tokenizer(const Tokenizer& tok, const ZayaConfig& c, const std::string& model_label) {
  ZAYA_CHECK(tok.vocab_size() <= c.vocab_size,
             "tokenizer '{}' has {} pieces but model {} has only {} embedding rows (config.json vocab_size); "
             "wrong tokenizer?",
             tok.model_path(), tok.vocab_size(), model_label, c.vocab_size);
  ZAYA_CHECK(tok.vocab_size() <= c.real_vocab_size,
             "tokenizer '{}' has {} pieces but model {} predicts only ids below {} (zaya_real_vocab_size); "
             "wrong tokenizer?",
             tok.model_path(), tok.vocab_size(), model_label, c.real_vocab_size);
  ZAYA_CHECK(tok.bos_id() == c.bos_token_id,
             "tokenizer '{}' has BOS id {} but model {} expects bos_token_id {} (config.json); wrong tokenizer?",
             tok.model_path(), tok.bos_id(), model_label, c.bos_token_id);
  return tok.vocab_size();
}

std::string default_tokenizer_path(const std::string& model_dir, const std::string& given, const std::string& hint) {
  if (!given.empty()) return given;
  const std::string next_to = (std::filesystem::path(model_dir) / "tokenizer.model").string();
  std::error_code ec;
  if (!hint.empty() && !std::filesystem::exists(next_to, ec)) return hint;
  return next_to;
}

Tokenizer load_model_tokenizer(const std::string& model_dir, const std::string& given, const std::string& hint) {
  const std::string path = default_tokenizer_path(model_dir, given, hint);
  std::error_code ec;
  ZAYA_CHECK(!given.empty() || std::filesystem::exists(path, ec),
             "{}: tokenizer model not found: model {} has no tokenizer.model{}; pass --tokenizer FILE (a "
             "SentencePiece .model) or copy it to {}",
             path, model_dir, hint.empty() ? "" : fmt::format(" and '{}' (the one it records) does not exist", hint),
             (std::filesystem::path(model_dir) / "tokenizer.model").string());
  return Tokenizer::load(path);
}

std::optional<Tokenizer> load_tokenizer_if_present(const std::string& model_dir, const std::string& given,
                                                   const std::string& hint) {
  const std::string path = default_tokenizer_path(model_dir, given, hint);
  std::error_code ec;
  if (given.empty() && !std::filesystem::exists(path, ec)) return std::nullopt;
  if (given.empty() && is_gguf_file(path) && !gguf_embeds_tokenizer(path)) return std::nullopt;
  return Tokenizer::load(path);
}

std::string TextStream::push(int32_t id) {
  ids_.push_back(id);
  std::string text = tok_.decode(ids_);
  // A character spelled in byte pieces decodes to U+FFFD until its last byte
  // arrives: hold trailing replacement characters (and incomplete sequences) back.
  static const std::string kReplacement = "\xEF\xBF\xBD";
  while (text.size() >= 3 && text.compare(text.size() - 3, 3, kReplacement) == 0) text.resize(text.size() - 3);
  text.resize(text.size() - incomplete_utf8_tail(text));
  if (text.compare(0, shown_.size(), shown_) != 0) return {};
  if (text.size() <= shown_.size()) return {};
  std::string added = text.substr(shown_.size());
  shown_ = std::move(text);
  return added;
}

std::string TextStream::flush() {
  std::string text = tok_.decode(ids_);
  if (text.size() <= shown_.size() || text.compare(0, shown_.size(), shown_) != 0) return {};
  std::string added = text.substr(shown_.size());
  shown_ = std::move(text);
  return added;
}

}  // namespace zaya
