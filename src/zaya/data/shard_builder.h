#pragma once
// Corpus -> token shards (docs/formats-data.md, "Building shards").
//
// Each document of the corpus (corpus_input.h: text or JSONL files, plain or
// compressed) is encoded as [bos] + tokens + [eos] and written to
// OUT_DIR/train.{bin,idx} or OUT_DIR/val.{bin,idx}, as zaya token shards or a
// Megatron indexed dataset. Fine-tuning data (ShardBuildOptions::sft, `zaya
// data sft`) reads each JSONL line as a conversation or a prompt/completion
// pair (sft_example.h) and writes its loss mask beside each split
// (OUT_DIR/train.mask, val.mask: loss_mask.h). The split is decided per document by a seeded
// hash of its index, so validation documents are spread through the corpus,
// and it does not depend on the tokenizer or the worker count.
//
// The corpus is streamed once (ordered_pipeline.h): one thread reads and
// decompresses, `workers` threads validate and encode batches of records, and
// the calling thread writes them in corpus order, so memory stays bounded
// whatever the corpus size and the output is byte-identical for any number of
// workers. Only when a split came out empty (tiny corpora, val_fraction 0)
// is the corpus read a second time, with one document moved (DocumentSplit).
// Nothing is renamed into place before every file is written and synced; an
// interrupted build leaves the previous dataset (or none), never a mix, and
// temporary *.tmp files that no reader opens.

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "zaya/data/corpus_input.h"
#include "zaya/data/dataset_writer.h"
#include "zaya/data/sft_example.h"
#include "zaya/data/shard_reader.h"

namespace zaya {

// Where a build stands (ShardBuildOptions::progress).
struct ShardBuildProgress {
  uint64_t bytes_read = 0;   // input bytes consumed (compressed, as on disk)
  uint64_t bytes_total = 0;  // all input files
  uint64_t documents = 0;    // written so far in this pass (examples, for fine-tuning data)
  uint64_t tokens = 0;
  uint64_t skipped = 0;    // bad records skipped (skip_bad)
  double elapsed_s = 0.0;  // since the build started
  int pass = 1;            // 2 when the corpus is read again (an empty split)
  bool finished = false;   // the last call, after the files are in place
};

struct ShardBuildOptions {
  CorpusSpec corpus;           // inputs, format, JSONL field, skip_bad
  std::string tokenizer_path;  // SentencePiece .model (must define bos and eos)
  std::string out_dir;         // receives train.{bin,idx} and val.{bin,idx}
  double val_fraction = 0.02;  // expected fraction of documents in val, in [0, 1)
  uint64_t seed = 0;           // seeds the train/val split
  DatasetFormat format = DatasetFormat::kZaya;
  // Set: fine-tuning data. Every record must be a JSONL object of one of the
  // schemas of sft_example.h (else a bad record: FILE: line N: REASON), the
  // documents are its rendering, and each split gets its loss mask. Unset: a
  // plain build, which removes a loss mask left in OUT_DIR by an earlier one.
  std::optional<SftOptions> sft;
  int workers = 0;  // encoding threads; 0: OpenMP's thread count (OMP_NUM_THREADS or the cores)
  // Called on the calling thread about every progress_interval_s and once at
  // the end; an exception thrown from it aborts the build (nothing is committed).
  std::function<void(const ShardBuildProgress&)> progress;
  double progress_interval_s = 0.5;
};

struct SplitSummary {
  std::string prefix;  // OUT_DIR/train or OUT_DIR/val
  uint64_t documents = 0;
  uint64_t tokens = 0;
  uint64_t loss_tokens = 0;  // tokens that count for the loss (= tokens without a loss mask)
};

struct ShardBuildSummary {
  SplitSummary train;
  SplitSummary val;
  uint32_t vocab_size = 0;
  uint64_t corpus_bytes = 0;  // input files on disk
  uint64_t corpus_files = 0;
  uint64_t skipped = 0;       // bad records skipped (skip_bad)
  std::string first_skipped;  // the first skipped record's error, if any
  int passes = 1;
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
