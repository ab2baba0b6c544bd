#pragma once
// SentencePiece tokenizer (docs/formats-data.md, "Tokenizer").
//
// `Tokenizer::load` reads any SentencePiece .model, including Gemma 3's
// tokenizer.model (BPE, 262144 pieces), which is ZAYA1's tokenizer.
// `Tokenizer::train` trains a BPE or unigram model on a corpus with the Gemma
// id layout (pad=0, eos=1, bos=2, unk=3) so that configs agree with ZAYA1,
// and with Gemma's text handling: no normalisation, no dummy prefix, spaces
// kept as they are, "\n" a piece of its own, digits split, and byte fallback,
// so that decode(encode(text)) == text for any UTF-8 text.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "zaya/data/corpus_input.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace zaya {

struct TokenizerTrainSummary {
  uint64_t sentences = 0;  // training sentences available (before max_sentences)
  uint64_t skipped = 0;    // bad records skipped (corpus.skip_bad)
};

struct TokenizerTrainOptions {
  // Text or JSONL files, plain or compressed (corpus_input.h); every non-blank
  // line of every document is one training sentence.
  CorpusSpec corpus;
  std::string output_prefix;  // writes PREFIX.model (and PREFIX.vocab, for people to read)
  int32_t vocab_size = 4096;
  std::string model_type = "bpe";  // "bpe" or "unigram"
  // Fraction of the corpus's characters that get pieces of their own, in
  // [0.98, 1] (SentencePiece's range); the rarest rest are spelled with byte
  // pieces (with byte_fallback) or become <unk>.
  double character_coverage = 1.0;
  // Training sentences are the corpus's non-blank lines (cut at 8 KiB). When
  // there are more than this, each is kept with probability
  // max_sentences / count, decided by a seeded hash of its position, so about
  // max_sentences lines spread over the whole corpus are used; 0 uses all.
  int64_t max_sentences = 2'000'000;
  uint64_t seed = 0;  // seeds that selection
  // BPE training gives the same model for any thread count; unigram's EM sums
  // per thread, so its model depends on the count. 1 keeps every run identical.
  int32_t num_threads = 1;
  bool byte_fallback = true;  // spell unseen characters as UTF-8 bytes instead of <unk>
};

class Tokenizer {
 public:
  // Loads a SentencePiece model; fails naming the file if it is missing or
  // not a SentencePiece model. A GGUF file (zaya's, data/tokenizer_gguf.h)
  // gives the SentencePiece model embedded in it.
  static Tokenizer load(const std::string& model_path);
  // A model from the bytes of a .model file (e.g. embedded in a GGUF file);
  // `label` names it in errors and is its model_path().
  static Tokenizer from_serialized(std::string serialized, std::string label);

  // Trains a model on options.corpus_path and writes OUTPUT_PREFIX.model and
  // OUTPUT_PREFIX.vocab (one "piece<TAB>score" line per id, control characters
  // escaped). Deterministic: the same options give a byte-identical model.
  static TokenizerTrainSummary train(const TokenizerTrainOptions& options);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Token ids of `text`; no BOS/EOS is added. Safe to call from many threads.
  std::vector<int32_t> encode(std::string_view text) const;
  // Text of `count` ids; control ids (bos, eos, pad) decode to nothing.
  // Fails on an id outside [0, vocab_size()).
  std::string decode(const int32_t* ids, size_t count) const;
  std::string decode(const std::vector<int32_t>& ids) const { return decode(ids.data(), ids.size()); }

  // The piece string of `id` (SentencePiece's "▁" marks a space).
  std::string id_to_piece(int32_t id) const;
  // The id of `piece`, or unk_id() if the model has no such piece.
  int32_t piece_to_id(std::string_view piece) const;

  int32_t vocab_size() const;
  // Special ids; -1 where the model has no such token.
  int32_t bos_id() const;
  int32_t eos_id() const;
  int32_t pad_id() const;
  int32_t unk_id() const;

  // The piece's score (SentencePiece's log probability or merge rank).
  float score(int32_t id) const;
  // SentencePiece's type of the piece: 1 normal, 2 unknown, 3 control,
  // 4 user-defined, 5 unused, 6 byte (data/sentencepiece_proto.h).
  int32_t piece_type(int32_t id) const;
  // Whether the normaliser prefixes text with a space (SentencePiece's add_dummy_prefix).
  bool add_dummy_prefix() const { return add_dummy_prefix_; }
  // The serialized model: the bytes of the .model file it was loaded from.
  const std::string& serialized() const { return serialized_; }

  const std::string& model_path() const { return model_path_; }

 private:
  Tokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> sp, std::string serialized, std::string model_path);
  void check_id(int32_t id, std::string_view what) const;

  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::string serialized_;
  std::string model_path_;
  std::vector<int32_t> piece_types_;
  bool add_dummy_prefix_ = true;
};

}  // namespace zaya
