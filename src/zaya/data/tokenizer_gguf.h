#pragma once
// A Tokenizer in a GGUF file (docs/formats-gguf.md, "Tokenizer"): the
// vocabulary under llama.cpp's keys, for other tools, and the serialized
// SentencePiece model under zaya.tokenizer.sentencepiece_model, from which the
// exact tokenizer is rebuilt (io/gguf_vocab.h).

#include <cstdint>
#include <optional>
#include <string>

#include "zaya/data/tokenizer.h"
#include "zaya/io/gguf_value.h"
#include "zaya/io/gguf_vocab.h"

namespace zaya {

// True when `path` is a file that begins with the GGUF magic.
bool is_gguf_file(const std::string& path);

// The vocabulary of `tok` for a model of `vocab_size` embedding rows, as
// llama.cpp's converters write a SentencePiece model: model "llama", every
// piece with its score and type, rows beyond the tokenizer's pieces as
// "[PAD1]", "[PAD2]", ... (type unused, score -1000), the unknown id,
// add_bos_token true (zaya generate prepends BOS), add_eos_token false,
// add_space_prefix (the normaliser's add_dummy_prefix), and the serialized model.
GgufVocab tokenizer_gguf_vocab(const Tokenizer& tok, int64_t vocab_size);

// The tokenizer embedded in a GGUF file's metadata (its label names it), or
// nullopt when it embeds none. Fails when the embedded model cannot be loaded
// or disagrees with tokenizer.ggml.tokens / .token_type (a file edited by hand?).
std::optional<Tokenizer> tokenizer_from_gguf(const GgufMetadata& metadata);

// Whether the GGUF file at `path` embeds a SentencePiece model (metadata only).
bool gguf_embeds_tokenizer(const std::string& path);

// The tokenizer embedded in the GGUF file at `path`; fails, saying how to give
// one, when it embeds none.
Tokenizer load_gguf_tokenizer(const std::string& path);

}  // namespace zaya
