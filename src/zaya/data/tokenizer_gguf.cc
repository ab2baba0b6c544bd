#include "zaya/data/tokenizer_gguf.h"

#include <fmt/format.h>

#include <cstring>
#include <filesystem>

#include "zaya/core/error.h"
#include "zaya/io/file_descriptor.h"
#include "zaya/io/gguf.h"
#include "zaya/io/gguf_format.h"

namespace zaya {

bool is_gguf_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  const FileDescriptor file = FileDescriptor::open_read(path);
  if (file.size() < sizeof(kGgufMagic)) return false;
  char magic[sizeof(kGgufMagic)];
  file.read_exact(magic, sizeof(magic), 0, "the GGUF magic");
  return std::memcmp(magic, kGgufMagic, sizeof(magic)) == 0;
}

GgufVocab tokenizer_gguf_vocab(const Tokenizer& tok, int64_t vocab_size) {
  const int32_t n = tok.vocab_size();
  ZAYA_CHECK(n <= vocab_size, "tokenizer '{}' has {} pieces, more than the model's {} embedding rows", tok.model_path(),
             n, vocab_size);
  GgufVocab v;
  v.model = "llama";
  v.tokens.reserve(size_t(vocab_size));
  v.scores.reserve(size_t(vocab_size));
  v.token_types.reserve(size_t(vocab_size));
  for (int32_t id = 0; id < n; ++id) {
    v.tokens.push_back(tok.id_to_piece(id));
    v.scores.push_back(tok.score(id));
    v.token_types.push_back(tok.piece_type(id));
  }
  for (int64_t i = 1; i <= vocab_size - n; ++i) {
    v.tokens.push_back(fmt::format("[PAD{}]", i));
    v.scores.push_back(-1000.0f);
    v.token_types.push_back(int32_t(GgufTokenType::kUnused));
  }
  v.unknown_id = tok.unk_id();
  v.add_bos = true;
  v.add_eos = false;
  v.add_space_prefix = tok.add_dummy_prefix();
  v.sentencepiece_model = tok.serialized();
  return v;
}

std::optional<Tokenizer> tokenizer_from_gguf(const GgufMetadata& m) {
  std::optional<GgufVocab> vocab = read_gguf_vocab(m);
  if (!vocab || vocab->sentencepiece_model.empty()) return std::nullopt;
  Tokenizer tok = Tokenizer::from_serialized(std::move(vocab->sentencepiece_model), m.label());
  // The llama.cpp keys describe the same vocabulary (their padding rows aside).
  const size_t n = size_t(tok.vocab_size());
  if (!vocab->tokens.empty()) {
    ZAYA_CHECK(vocab->tokens.size() >= n, "{}: '{}' lists {} tokens, but the embedded SentencePiece model ({}) has {}",
               m.label(), kGgufTokensKey, vocab->tokens.size(), kZayaSentencePieceModelKey, n);
    for (size_t id = 0; id < n; ++id)
      ZAYA_CHECK(vocab->tokens[id] == tok.id_to_piece(int32_t(id)),
                 "{}: token {} is '{}' in '{}' but '{}' in the embedded SentencePiece model ({})", m.label(), id,
                 vocab->tokens[id], kGgufTokensKey, tok.id_to_piece(int32_t(id)), kZayaSentencePieceModelKey);
  }
  if (!vocab->token_types.empty())
    for (size_t id = 0; id < n; ++id)
      ZAYA_CHECK(vocab->token_types[id] == tok.piece_type(int32_t(id)),
                 "{}: token {} has type {} in '{}' but {} in the embedded SentencePiece model ({})", m.label(), id,
                 vocab->token_types[id], kGgufTokenTypeKey, tok.piece_type(int32_t(id)), kZayaSentencePieceModelKey);
  return tok;
}

bool gguf_embeds_tokenizer(const std::string& path) {
  return GgufFile::open(path).metadata().has(kZayaSentencePieceModelKey);
}

Tokenizer load_gguf_tokenizer(const std::string& path) {
  const GgufFile file = GgufFile::open(path);
  std::optional<Tokenizer> tok = tokenizer_from_gguf(file.metadata());
  ZAYA_CHECK(tok.has_value(),
             "{}: the GGUF file embeds no tokenizer ({}); pass --tokenizer FILE, put tokenizer.model beside it, or "
             "re-export it with `zaya ckpt export --tokenizer FILE`",
             path, kZayaSentencePieceModelKey);
  return std::move(*tok);
}

}  // namespace zaya
