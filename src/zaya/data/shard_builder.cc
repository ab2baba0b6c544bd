#include "zaya/data/shard_builder.h"

#include <fmt/format.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <vector>

#include "zaya/core/error.h"
#include "zaya/core/rng.h"
#include "zaya/core/timer.h"
#include "zaya/data/loss_mask.h"
#include "zaya/data/ordered_pipeline.h"
#include "zaya/data/shard_format.h"
#include "zaya/data/tokenizer.h"

namespace zaya {
namespace {

// Philox stream of the split hash, apart from other users of the seed.
constexpr uint64_t kSplitStream = 0x5A53504C4954ull;  // "ZSPLIT"

// Records are handed to the workers in batches of about this much text (or
// this many records); at most kInFlightPerWorker batches per worker exist at
// once, which bounds memory whatever the corpus size.
constexpr size_t kBatchBytes = size_t{1} << 20;
constexpr size_t kBatchRecords = 4096;
constexpr size_t kInFlightPerWorker = 4;

void validate(const ShardBuildOptions& o) {
  ZAYA_CHECK(!o.corpus.inputs.empty(), "shard build: no corpus inputs; expected text or JSONL files");
  ZAYA_CHECK(!o.tokenizer_path.empty(), "shard build: tokenizer_path is empty; expected a SentencePiece .model");
  ZAYA_CHECK(!o.out_dir.empty(), "shard build: out_dir is empty; expected a directory for train/val shards");
  ZAYA_CHECK(o.val_fraction >= 0.0 && o.val_fraction < 1.0, "shard build: val_fraction {} is outside [0, 1)",
             o.val_fraction);
  ZAYA_CHECK(o.workers >= 0 && o.workers <= 1024, "shard build: workers {} is outside [0, 1024] (0: all cores)",
             o.workers);
}

struct RecordBatch {
  std::vector<CorpusRecord> records;
  uint64_t bytes_read = 0;  // input bytes consumed once this batch was read
};

struct EncodedDocument {
  std::vector<int32_t> tokens;  // [bos] + text + [eos], or empty when bad
  std::vector<uint8_t> mask;    // fine-tuning data: the loss mask of `tokens`
  std::string error;            // why the record is bad
};

// One split's outputs: the dataset and, for fine-tuning data, its loss mask.
struct SplitWriters {
  std::unique_ptr<DatasetWriter> data;
  std::unique_ptr<LossMaskWriter> mask;

  void add(const EncodedDocument& e) {
    data->add_document(e.tokens);
    if (mask) mask->add_document(e.tokens, e.mask);
  }
  // Removes the split's old index (and any old loss mask): from here until
  // commit() readers find no dataset rather than a mix of old and new files.
  void remove_old() const {
    for (const std::string& path : {shard_idx_path(data->prefix()), loss_mask_path(data->prefix())})
      ZAYA_CHECK(::unlink(path.c_str()) == 0 || errno == ENOENT, "{}: cannot remove the old file: {}", path,
                 std::strerror(errno));
  }
  // The mask first: until the index is in place nothing reads the split.
  void commit() {
    if (mask) mask->commit();
    data->commit();
  }
  SplitSummary summary() const {
    return SplitSummary{data->prefix(), data->num_documents(), data->num_tokens(),
                        mask ? mask->num_selected() : data->num_tokens()};
  }
};

struct EncodedBatch {
  std::vector<EncodedDocument> documents;
  uint64_t bytes_read = 0;
};

// What a pass decides and counts; a second pass forces one document over.
struct PassResult {
  uint64_t documents = 0, val = 0, skipped = 0;
  uint64_t argmin = 0, argmax = 0;  // documents with the smallest / largest split hash
  std::string first_skipped;
};

}  // namespace

double DocumentSplit::document_uniform(uint64_t seed, uint64_t document_index) {
  auto b = philox4x32(seed, kSplitStream, document_index);
  uint64_t bits = (static_cast<uint64_t>(b[0]) << 32) | b[1];
  return static_cast<double>(bits >> 11) * (1.0 / 9007199254740992.0);  // 53 bits / 2^53
}

DocumentSplit::DocumentSplit(uint64_t num_documents, double val_fraction, uint64_t seed)
    : val_fraction_(val_fraction), seed_(seed) {
  ZAYA_CHECK(num_documents >= 2, "a train/val split needs at least 2 documents, got {}", num_documents);
  ZAYA_CHECK(val_fraction >= 0.0 && val_fraction < 1.0, "val_fraction {} is outside [0, 1)", val_fraction);
  uint64_t val = 0, argmin = 0, argmax = 0;
  double umin = 2.0, umax = -1.0;
  for (uint64_t i = 0; i < num_documents; ++i) {
    double u = document_uniform(seed, i);
    if (u < val_fraction) ++val;
    if (u < umin) {
      umin = u;
      argmin = i;
    }
    if (u > umax) {
      umax = u;
      argmax = i;
    }
  }
  if (val == 0) forced_val_ = argmin;
  if (val == num_documents) forced_train_ = argmax;
}

bool DocumentSplit::is_validation(uint64_t i) const {
  if (i == forced_val_) return true;
  if (i == forced_train_) return false;
  return document_uniform(seed_, i) < val_fraction_;
}

namespace {

class ShardBuild {
 public:
  ShardBuild(const ShardBuildOptions& o, const Tokenizer& tok, std::vector<CorpusFile> files)
      : o_(o), tok_(tok), files_(std::move(files)), t0_(now_seconds()) {}

  // Reads and writes the corpus once; forced_* move one document (UINT64_MAX: none).
  PassResult pass(int number, uint64_t forced_val, uint64_t forced_train, uint32_t vocab, SplitWriters& train,
                  SplitWriters& val, std::vector<uint64_t>& train_counts) {
    for (auto [w, name] : {std::pair{&train, "train"}, std::pair{&val, "val"}}) {
      *w = SplitWriters();  // a previous pass's writers remove their temporary files first
      const std::string prefix = (std::filesystem::path(o_.out_dir) / name).string();
      w->data = make_dataset_writer(o_.format, prefix, vocab);
      if (o_.sft) w->mask = std::make_unique<LossMaskWriter>(prefix);
    }
    train_counts.assign(vocab, 0);
    PassResult r;
    double umin = 2.0, umax = -1.0;
    CorpusRecordReader reader(files_);
    ShardBuildProgress progress{0, reader.bytes_total(), 0, 0, 0, 0.0, number, false};
    double last_report = now_seconds();
    const int workers = o_.workers > 0 ? o_.workers : std::max(1, omp_get_max_threads());

    std::function<bool(RecordBatch&)> produce = [&](RecordBatch& batch) {
      size_t bytes = 0;
      CorpusRecord record;
      while (bytes < kBatchBytes && batch.records.size() < kBatchRecords && reader.next(record)) {
        bytes += record.text.size();
        batch.records.push_back(std::move(record));
      }
      batch.bytes_read = reader.bytes_read();
      return !batch.records.empty();
    };
    std::function<void(RecordBatch&&, EncodedBatch&)> transform = [&](RecordBatch&& batch, EncodedBatch& out) {
      out.bytes_read = batch.bytes_read;
      out.documents.resize(batch.records.size());
      for (size_t i = 0; i < batch.records.size(); ++i) {
        EncodedDocument& e = out.documents[i];
        if (o_.sft) {
          encode_example(std::move(batch.records[i]), e);
          continue;
        }
        DecodedRecord d = decode_record(std::move(batch.records[i]), files_, o_.corpus.field);
        if (!d.ok) {
          e.error = std::move(d.error);
          continue;
        }
        const std::vector<int32_t> ids = tok_.encode(d.text);
        e.tokens.reserve(ids.size() + 2);
        e.tokens.push_back(tok_.bos_id());
        e.tokens.insert(e.tokens.end(), ids.begin(), ids.end());
        e.tokens.push_back(tok_.eos_id());
      }
    };
    std::function<void(EncodedBatch&)> consume = [&](EncodedBatch& batch) {
      for (EncodedDocument& e : batch.documents) {
        if (!e.error.empty()) {
          ZAYA_CHECK(o_.corpus.skip_bad, "{} (use --skip-bad to skip and count such records)", e.error);
          if (r.skipped++ == 0) r.first_skipped = e.error;
          continue;
        }
        const uint64_t index = r.documents++;
        const double u = DocumentSplit::document_uniform(o_.seed, index);
        if (u < umin) {
          umin = u;
          r.argmin = index;
        }
        if (u > umax) {
          umax = u;
          r.argmax = index;
        }
        const bool is_val = index == forced_val || (index != forced_train && u < o_.val_fraction);
        if (is_val) {
          val.add(e);
          ++r.val;
        } else {
          train.add(e);
          for (int32_t id : e.tokens) ++train_counts[static_cast<size_t>(id)];
        }
        progress.tokens += e.tokens.size();
      }
      progress.documents = r.documents;
      progress.skipped = r.skipped;
      progress.bytes_read = batch.bytes_read;
      const double now = now_seconds();
      if (o_.progress && now - last_report >= o_.progress_interval_s) {
        last_report = now;
        progress.elapsed_s = now - t0_;
        o_.progress(progress);
      }
    };
    run_ordered_pipeline<RecordBatch, EncodedBatch>(workers, kInFlightPerWorker * static_cast<size_t>(workers) + 2,
                                                    produce, transform, consume);
    last_ = progress;
    return r;
  }

  // A fine-tuning record: its example's tokens and loss mask, or why it is bad.
  void encode_example(CorpusRecord&& record, EncodedDocument& e) const {
    DecodedJson d = decode_json_record(std::move(record), files_);
    if (!d.ok) {
      e.error = std::move(d.error);
      return;
    }
    try {
      SftDocument doc =
          encode_sft_example(tok_, parse_sft_example(d.value, o_.sft->pairs, o_.sft->format), o_.sft->loss_on);
      e.tokens = std::move(doc.tokens);
      e.mask = std::move(doc.mask);
    } catch (const Error& err) {
      e.error = fmt::format("{}: {}", d.where, err.what());
    }
  }

  void report_finished() {
    if (!o_.progress) return;
    last_.finished = true;
    last_.elapsed_s = now_seconds() - t0_;
    o_.progress(last_);
  }

 private:
  const ShardBuildOptions& o_;
  const Tokenizer& tok_;
  std::vector<CorpusFile> files_;
  double t0_;
  ShardBuildProgress last_;
};

// The corpus's name in messages: its one file, or how many files.
std::string corpus_label(const std::vector<CorpusFile>& files) {
  return files.size() == 1 ? files[0].path : fmt::format("the corpus ({} files)", files.size());
}

}  // namespace

ShardBuildSummary build_token_shards(const ShardBuildOptions& o) {
  validate(o);
  std::vector<CorpusFile> files = expand_corpus_inputs(o.corpus);
  Tokenizer tok = Tokenizer::load(o.tokenizer_path);
  ZAYA_CHECK(tok.bos_id() >= 0 && tok.eos_id() >= 0,
             "{}: tokenizer has no bos or eos token (bos_id {}, eos_id {}); documents are framed as "
             "[bos] tokens [eos]",
             o.tokenizer_path, tok.bos_id(), tok.eos_id());

  ShardBuildSummary summary;
  summary.vocab_size = static_cast<uint32_t>(tok.vocab_size());
  summary.corpus_files = files.size();
  for (const auto& f : files) summary.corpus_bytes += f.bytes;
  const std::string label = corpus_label(files);

  ShardBuild build(o, tok, files);
  SplitWriters train, val;
  std::vector<uint64_t> train_counts;
  PassResult r = build.pass(1, UINT64_MAX, UINT64_MAX, summary.vocab_size, train, val, train_counts);
  ZAYA_CHECK(r.documents >= 2,
             "{}: corpus has {} document(s); need at least 2 (one for train, one for val); text documents are "
             "separated by blank lines, JSONL has one per line",
             label, r.documents);
  if (r.val == 0 || r.val == r.documents) {
    // A split came out empty: move the document with the smallest (largest)
    // hash into it, as DocumentSplit does, and write everything again.
    const uint64_t forced_val = r.val == 0 ? r.argmin : UINT64_MAX;
    const uint64_t forced_train = r.val == r.documents ? r.argmax : UINT64_MAX;
    const uint64_t first = r.documents;
    r = build.pass(2, forced_val, forced_train, summary.vocab_size, train, val, train_counts);
    ZAYA_CHECK(r.documents == first,
               "{}: corpus changed while shards were built ({} documents on the first read, {} on the second)", label,
               first, r.documents);
    summary.passes = 2;
  }

  // Commit: both splits are complete on disk under temporary names; remove
  // the old indexes first, so that no moment has a new split beside an old one.
  for (SplitWriters* w : {&train, &val}) {
    w->data->prepare();
    if (w->mask) w->mask->prepare();
  }
  train.remove_old();
  val.remove_old();
  train.commit();
  val.commit();

  summary.train = train.summary();
  summary.val = val.summary();
  summary.skipped = r.skipped;
  summary.first_skipped = r.first_skipped;
  summary.train_unigram_entropy = unigram_entropy(train_counts);
  build.report_finished();
  return summary;
}

double unigram_entropy(std::span<const uint64_t> counts) {
  uint64_t total = 0;
  for (uint64_t c : counts) total += c;
  if (total == 0) return 0.0;
  // H = -sum p ln p with p = c / T, summed in vocabulary order (deterministic).
  const double inv_total = 1.0 / static_cast<double>(total);
  double h = 0.0;
  for (uint64_t c : counts) {
    if (c == 0) continue;
    double p = static_cast<double>(c) * inv_total;
    h -= p * std::log(p);
  }
  return h;
}

double unigram_entropy(const ShardReader& shard) {
  std::vector<uint64_t> counts(shard.vocab_size(), 0);
  const uint64_t n = shard.num_tokens();
  constexpr uint64_t kBlock = 1 << 16;
  std::vector<uint32_t> block(kBlock);
  for (uint64_t at = 0; at < n; at += kBlock) {
    const uint64_t m = std::min(kBlock, n - at);
    shard.read_tokens(at, m, block.data());
    for (uint64_t i = 0; i < m; ++i) {
      ZAYA_CHECK(block[i] < shard.vocab_size(), "{}: token {} is {}, not below the vocab size {}", shard.bin_path(),
                 at + i, block[i], shard.vocab_size());
      ++counts[block[i]];
    }
  }
  return unigram_entropy(counts);
}

}  // namespace zaya
