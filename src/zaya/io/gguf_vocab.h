#pragma once
// A tokenizer's vocabulary as GGUF metadata (docs/formats-gguf.md,
// "Tokenizer"): llama.cpp's keys for a SentencePiece model
// (tokenizer.ggml.model "llama", .tokens, .scores, .token_type, ...), which
// other GGUF tools read, plus zaya.tokenizer.sentencepiece_model: the
// serialized SentencePiece model itself (an array of uint8), from which zaya
// rebuilds the exact tokenizer (normaliser, merges and all), so a GGUF file
// is a complete model on its own.
//
// This part knows no SentencePiece (data/tokenizer_gguf.h converts a
// Tokenizer): it builds and checks the keys, so the GGUF fuzz target covers
// the reader's checks too.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zaya/io/gguf_value.h"

namespace zaya {

inline constexpr const char* kGgufTokenizerModelKey = "tokenizer.ggml.model";
inline constexpr const char* kGgufTokensKey = "tokenizer.ggml.tokens";
inline constexpr const char* kGgufScoresKey = "tokenizer.ggml.scores";
inline constexpr const char* kGgufTokenTypeKey = "tokenizer.ggml.token_type";
inline constexpr const char* kGgufUnknownIdKey = "tokenizer.ggml.unknown_token_id";
inline constexpr const char* kGgufAddBosKey = "tokenizer.ggml.add_bos_token";
inline constexpr const char* kGgufAddEosKey = "tokenizer.ggml.add_eos_token";
inline constexpr const char* kGgufAddSpacePrefixKey = "tokenizer.ggml.add_space_prefix";
// zaya's own: the serialized SentencePiece ModelProto, as an array of uint8.
inline constexpr const char* kZayaSentencePieceModelKey = "zaya.tokenizer.sentencepiece_model";

// llama.cpp's token types (llama_token_type), which are SentencePiece's piece types.
enum class GgufTokenType : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct GgufVocab {
  std::string model = "llama";  // tokenizer.ggml.model: "llama" for a SentencePiece model
  std::vector<std::string> tokens;
  std::vector<float> scores;         // empty or one per token
  std::vector<int32_t> token_types;  // empty or one per token (GgufTokenType values)
  int64_t unknown_id = -1;           // -1: not written
  std::optional<bool> add_bos, add_eos, add_space_prefix;
  std::string sentencepiece_model;  // serialized ModelProto; empty: not embedded
};

// The metadata pairs of `vocab`, in the order llama.cpp's converters write
// them, the embedded model last. Fails on a vocabulary whose arrays disagree.
std::vector<GgufKeyValue> gguf_vocab_metadata(const GgufVocab& vocab);

// The vocabulary of a file, or nullopt when it has neither tokenizer.ggml.tokens
// nor an embedded SentencePiece model. Checks types and sizes (errors name
// metadata.label() and the key): tokens an array of strings; scores float32
// and token_type int32 arrays, when present, of the same length; token types
// 1..6 (0, llama.cpp's "undefined", too); the embedded model an array of uint8.
std::optional<GgufVocab> read_gguf_vocab(const GgufMetadata& metadata);

}  // namespace zaya
