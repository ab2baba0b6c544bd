#pragma once
// Corpus -> token shards (docs/formats-data.md, "Building shards").
//
// Each document of the corpus (corpus.h: blank-line separated) is encoded as
// [bos] + tokens + [eos] and written to OUT_DIR/train.{bin,idx} or
// OUT_DIR/val.{bin,idx}. The split is decided per document by a seeded hash of
// its index, so validation documents are spread through the corpus, and it
// does not depend on the tokenizer or the thread count. Encoding runs in
// parallel (OpenMP); documents are written in corpus order, so the output is
// byte-identical for any number of threads.

#include <cstdint>
#include <span>
#include <string>

#include "zaya/data/shard_reader.h"

namespace zaya {

struct ShardBuildOptions {
  std::string corpus_path;     // UTF-8 text, documents separated by blank lines
  std::string tokenizer_path;  // SentencePiece .model (must define bos and eos)
  std::string out_dir;         // receives train.{bin,idx} and val.{bin,idx}
  double val_fraction = 0.02;  // expected fraction of documents in val, in [0, 1)
  uint64_t seed = 0;           // seeds the train/val split
};

struct SplitSummary {
  std::string prefix;  // OUT_DIR/train or OUT_DIR/val
  uint64_t documents = 0;
  uint64_t tokens = 0;
};

struct ShardBuildSummary {
  SplitSummary train;
  SplitSummary val;
  uint32_t vocab_size = 0;
  uint64_t corpus_bytes = 0;
  // Entropy of the train split's token frequencies, in nats per token: the loss
  // of the best model that ignores context, a reference for validation loss.
  double train_unigram_entropy = 0.0;
};

// Which documents of a corpus go to validation. Document i is a validation
// document when u(seed, i) < val_fraction, u a Philox hash uniform in [0, 1);
// if that leaves a split empty, the document with the smallest (largest) u is
// moved to validation (train), so each split has at least one document.
class DocumentSplit {
 public:
  // Decides the split for a corpus of `num_documents` (>= 2) documents.
  DocumentSplit(uint64_t num_documents, double val_fraction, uint64_t seed);

  bool is_validation(uint64_t document_index) const;

  // The hash behind the split, uniform in [0, 1).
  static double document_uniform(uint64_t seed, uint64_t document_index);

 private:
  double val_fraction_;
  uint64_t seed_;
  uint64_t forced_val_ = UINT64_MAX;    // index moved into val, or UINT64_MAX
  uint64_t forced_train_ = UINT64_MAX;  // index moved into train, or UINT64_MAX
};

ShardBuildSummary build_token_shards(const ShardBuildOptions& options);

// Unigram entropy -sum_v p_v ln p_v (nats/token) of token frequencies.
double unigram_entropy(std::span<const uint64_t> counts);
// Unigram entropy of all tokens of a shard (bos and eos included).
double unigram_entropy(const ShardReader& shard);

}  // namespace zaya
