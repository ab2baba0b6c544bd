#include "zaya/data/shard_builder.h"

#include <cmath>
#include <exception>
#include <filesystem>
#include <vector>

#include "zaya/core/error.h"
#include "zaya/core/rng.h"
#include "zaya/data/corpus.h"
#include "zaya/data/shard_writer.h"
#include "zaya/data/tokenizer.h"

namespace zaya {
namespace {

// Philox stream of the split hash, apart from other users of the seed.
constexpr uint64_t kSplitStream = 0x5A53504C4954ull;  // "ZSPLIT"

// Documents are read and encoded in batches of about this much text, which
// bounds memory while giving every thread plenty of documents.
constexpr size_t kBatchBytes = size_t{16} << 20;
constexpr size_t kBatchDocuments = 16384;

void validate(const ShardBuildOptions& o) {
  ZAYA_CHECK(!o.corpus_path.empty(), "shard build: corpus_path is empty; expected a UTF-8 text file");
  ZAYA_CHECK(!o.tokenizer_path.empty(), "shard build: tokenizer_path is empty; expected a SentencePiece .model");
  ZAYA_CHECK(!o.out_dir.empty(), "shard build: out_dir is empty; expected a directory for train/val shards");
  ZAYA_CHECK(o.val_fraction >= 0.0 && o.val_fraction < 1.0, "shard build: val_fraction {} is outside [0, 1)",
             o.val_fraction);
}

uint64_t count_documents(const std::string& corpus_path) {
  CorpusReader reader(corpus_path);
  CorpusDocument doc;
  uint64_t n = 0;
  while (reader.next(doc)) ++n;
  return n;
}

// Encodes a batch as [bos] + tokens + [eos] per document, in parallel. An
// exception cannot leave an OpenMP region, so the first one (in document
// order) is kept and rethrown afterwards.
void encode_batch(const Tokenizer& tok, const std::vector<CorpusDocument>& docs,
                  std::vector<std::vector<int32_t>>& encoded) {
  const int64_t n = static_cast<int64_t>(docs.size());
  encoded.resize(docs.size());
  std::vector<std::exception_ptr> errors(docs.size());
#pragma omp parallel for schedule(dynamic, 16)
  for (int64_t i = 0; i < n; ++i) {
    try {
      std::vector<int32_t> ids = tok.encode(docs[i].text);
      std::vector<int32_t>& out = encoded[i];
      out.clear();
      out.reserve(ids.size() + 2);
      out.push_back(tok.bos_id());
      out.insert(out.end(), ids.begin(), ids.end());
      out.push_back(tok.eos_id());
    } catch (...) {
      errors[i] = std::current_exception();
    }
  }
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

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

ShardBuildSummary build_token_shards(const ShardBuildOptions& o) {
  validate(o);
  Tokenizer tok = Tokenizer::load(o.tokenizer_path);
  ZAYA_CHECK(tok.bos_id() >= 0 && tok.eos_id() >= 0,
             "{}: tokenizer has no bos or eos token (bos_id {}, eos_id {}); documents are framed as "
             "[bos] tokens [eos]",
             o.tokenizer_path, tok.bos_id(), tok.eos_id());

  // Pass 1: count documents (and validate the UTF-8) so the split is known
  // before anything is written.
  const uint64_t num_documents = count_documents(o.corpus_path);
  ZAYA_CHECK(num_documents >= 2,
             "{}: corpus has {} document(s); need at least 2 (one for train, one for val); documents are "
             "separated by blank lines",
             o.corpus_path, num_documents);
  DocumentSplit split(num_documents, o.val_fraction, o.seed);

  ShardBuildSummary summary;
  summary.vocab_size = static_cast<uint32_t>(tok.vocab_size());
  std::error_code ec;
  summary.corpus_bytes = std::filesystem::file_size(o.corpus_path, ec);
  ZAYA_CHECK(!ec, "{}: cannot read file size: {}", o.corpus_path, ec.message());

  const std::string train_prefix = (std::filesystem::path(o.out_dir) / "train").string();
  const std::string val_prefix = (std::filesystem::path(o.out_dir) / "val").string();
  ShardWriter train(train_prefix, summary.vocab_size);
  ShardWriter val(val_prefix, summary.vocab_size);
  std::vector<uint64_t> train_counts(summary.vocab_size, 0);

  // Pass 2: encode in parallel, write in corpus order.
  CorpusReader reader(o.corpus_path);
  std::vector<CorpusDocument> batch;
  std::vector<std::vector<int32_t>> encoded;
  bool more = true;
  while (more) {
    batch.clear();
    size_t bytes = 0;
    while (bytes < kBatchBytes && batch.size() < kBatchDocuments) {
      CorpusDocument doc;
      if (!(more = reader.next(doc))) break;
      bytes += doc.text.size();
      batch.push_back(std::move(doc));
    }
    encode_batch(tok, batch, encoded);
    for (size_t i = 0; i < batch.size(); ++i) {
      if (split.is_validation(batch[i].index)) {
        val.add_document(encoded[i]);
      } else {
        train.add_document(encoded[i]);
        for (int32_t id : encoded[i]) ++train_counts[static_cast<size_t>(id)];
      }
    }
  }
  ZAYA_CHECK(train.num_documents() + val.num_documents() == num_documents,
             "{}: corpus changed while shards were built ({} documents on the first read, {} on the second)",
             o.corpus_path, num_documents, train.num_documents() + val.num_documents());

  ShardWriteSummary t = train.finish();
  ShardWriteSummary v = val.finish();
  summary.train = SplitSummary{t.prefix, t.num_documents, t.num_tokens};
  summary.val = SplitSummary{v.prefix, v.num_documents, v.num_tokens};
  summary.train_unigram_entropy = unigram_entropy(train_counts);
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
  const uint32_t* t = shard.tokens();
  const uint64_t n = shard.num_tokens();
  for (uint64_t i = 0; i < n; ++i) {
    ZAYA_CHECK(t[i] < shard.vocab_size(), "{}: token {} is {}, not below the vocab size {}", shard.bin_path(), i, t[i],
               shard.vocab_size());
    ++counts[t[i]];
  }
  return unigram_entropy(counts);
}

}  // namespace zaya
