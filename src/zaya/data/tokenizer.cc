#include "zaya/data/tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <exception>
#include <filesystem>
#include <unordered_map>

#include "zaya/core/error.h"
#include "zaya/core/rng.h"
#include "zaya/data/corpus.h"
#include "zaya/data/sentencepiece_proto.h"
#include "zaya/data/tokenizer_gguf.h"
#include "zaya/io/atomic_file.h"
#include "zaya/io/file_descriptor.h"

namespace zaya {
namespace {

// SentencePiece skips training lines longer than its max_sentence_length; we
// cut longer lines into pieces of at most this many bytes instead, so nothing
// in the corpus is silently ignored.
constexpr size_t kMaxSentenceBytes = 8192;

// Philox stream of the training-sentence selection.
constexpr uint64_t kSentenceStream = 0x5A544F4B53454Cull;  // "ZTOKSEL"

// Feeds SentencePiece the corpus's non-blank lines (cut into chunks of at most
// kMaxSentenceBytes), keeping chunk i when u(seed, i) < keep_fraction.
// SentencePiece's own sampling (input_sentence_size) uses a fixed seed, hence
// this one. Errors (unreadable file, invalid UTF-8) are kept and rethrown after
// training, because an exception thrown through SentencePiece's frames would
// skip its cleanup.
class CorpusLineIterator : public sentencepiece::SentenceIterator {
 public:
  CorpusLineIterator(const CorpusSpec& spec, const std::vector<CorpusFile>& files, uint64_t seed, double keep_fraction)
      : spec_(spec), files_(files), records_(files), seed_(seed), keep_fraction_(keep_fraction) {
    Next();
  }

  bool done() const override { return done_; }
  const std::string& value() const override { return value_; }
  sentencepiece::util::Status status() const override {
    if (error_) return sentencepiece::util::Status(sentencepiece::util::StatusCode::kInternal, "corpus read error");
    return sentencepiece::util::Status();
  }

  void Next() override {
    try {
      advance();
    } catch (...) {
      error_ = std::current_exception();
      done_ = true;
    }
  }

  void rethrow_if_failed() const {
    if (error_) std::rethrow_exception(error_);
  }
  uint64_t sentences() const { return sentences_; }
  uint64_t skipped() const { return skipped_; }

 private:
  void advance() {
    for (;;) {
      while (rest_.empty()) {
        if (!next_line()) {
          done_ = true;
          return;
        }
        if (!is_blank_line(line_)) rest_ = line_;
      }
      value_ = take_chunk();
      const uint64_t index = chunk_index_++;
      if (keep_fraction_ >= 1.0 || keep(index)) break;
    }
    ++sentences_;
  }

  // The next line of the current document, reading the next record when it is used up.
  bool next_line() {
    while (doc_pos_ >= doc_.size()) {
      CorpusRecord record;
      if (!records_.next(record)) return false;
      DecodedRecord d = decode_record(std::move(record), files_, spec_.field);
      if (!d.ok) {
        ZAYA_CHECK(spec_.skip_bad, "{} (use --skip-bad to skip and count such records)", d.error);
        ++skipped_;
        continue;
      }
      doc_ = std::move(d.text);
      doc_pos_ = 0;
    }
    size_t nl = doc_.find('\n', doc_pos_);
    if (nl == std::string::npos) nl = doc_.size();
    line_.assign(doc_, doc_pos_, nl - doc_pos_);
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    doc_pos_ = nl + 1;
    return true;
  }

  bool keep(uint64_t index) const {
    auto b = philox4x32(seed_, kSentenceStream, index);
    uint64_t bits = (static_cast<uint64_t>(b[0]) << 32) | b[1];
    return static_cast<double>(bits >> 11) * (1.0 / 9007199254740992.0) < keep_fraction_;
  }

  // The next at most kMaxSentenceBytes of rest_, cut before a space where
  // possible (the space then starts the next chunk, as it would mid-line), and
  // never inside a UTF-8 sequence.
  std::string take_chunk() {
    size_t cut = rest_.size();
    if (cut > kMaxSentenceBytes) {
      size_t space = rest_.rfind(' ', kMaxSentenceBytes);
      cut = (space != std::string::npos && space > 0) ? space : kMaxSentenceBytes;
      while (cut > 0 && (static_cast<unsigned char>(rest_[cut]) & 0xC0) == 0x80) --cut;
    }
    std::string chunk = rest_.substr(0, cut);
    rest_.erase(0, cut);
    return chunk;
  }

  const CorpusSpec& spec_;
  const std::vector<CorpusFile>& files_;
  CorpusRecordReader records_;
  std::string doc_;
  size_t doc_pos_ = 0;
  uint64_t skipped_ = 0;
  uint64_t seed_;
  double keep_fraction_;
  std::string line_, rest_, value_;
  bool done_ = false;
  uint64_t chunk_index_ = 0;
  uint64_t sentences_ = 0;
  std::exception_ptr error_;
};

// One line of PREFIX.vocab: control characters escaped so that every piece
// (Gemma-style tokenizers have a "\n" piece) stays on one line.
std::string escape_piece(const std::string& piece) {
  std::string out;
  for (unsigned char c : piece) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

void validate(const TokenizerTrainOptions& o) {
  ZAYA_CHECK(!o.corpus.inputs.empty(), "tokenizer training: no corpus inputs; expected text or JSONL files");
  ZAYA_CHECK(!o.output_prefix.empty(), "tokenizer training: output_prefix is empty; expected e.g. 'out/tokenizer'");
  ZAYA_CHECK(o.model_type == "bpe" || o.model_type == "unigram",
             "tokenizer training: model_type '{}' is not supported; expected 'bpe' or 'unigram'", o.model_type);
  // 4 special pieces + "\n" + 256 byte pieces (with byte fallback) + at least one learned piece.
  const int32_t min_vocab = o.byte_fallback ? 262 : 6;
  ZAYA_CHECK(o.vocab_size >= min_vocab,
             "tokenizer training: vocab_size {} is too small; expected at least {} (4 special pieces, \"\\n\"{})",
             o.vocab_size, min_vocab, o.byte_fallback ? " and 256 byte pieces" : "");
  ZAYA_CHECK(o.character_coverage >= 0.98 && o.character_coverage <= 1.0,
             "tokenizer training: character_coverage {} is outside [0.98, 1] (SentencePiece's range)",
             o.character_coverage);
  ZAYA_CHECK(o.max_sentences >= 0, "tokenizer training: max_sentences {} is negative; expected >= 0 (0 = all)",
             o.max_sentences);
  ZAYA_CHECK(o.num_threads >= 1 && o.num_threads <= 1024, "tokenizer training: num_threads {} is outside [1, 1024]",
             o.num_threads);
}

// The number of training sentences (chunks) the corpus yields.
uint64_t count_sentences(const CorpusSpec& spec, const std::vector<CorpusFile>& files) {
  CorpusLineIterator all(spec, files, 0, 1.0);
  while (!all.done()) all.Next();
  all.rethrow_if_failed();
  return all.sentences();
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> sp, std::string serialized,
                     std::string model_path)
    : sp_(std::move(sp)), serialized_(std::move(serialized)), model_path_(std::move(model_path)) {
  SentencePieceProtoInfo info = decode_sentencepiece_proto(serialized_, model_path_);
  ZAYA_CHECK(info.piece_types.size() == size_t(sp_->GetPieceSize()),
             "{}: the SentencePiece model lists {} pieces, its processor {}", model_path_, info.piece_types.size(),
             sp_->GetPieceSize());
  piece_types_ = std::move(info.piece_types);
  add_dummy_prefix_ = info.add_dummy_prefix;
}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::load(const std::string& model_path) {
  std::error_code ec;
  ZAYA_CHECK(std::filesystem::is_regular_file(model_path, ec),
             "{}: tokenizer model not found (expected a SentencePiece .model file)", model_path);
  if (is_gguf_file(model_path)) return load_gguf_tokenizer(model_path);
  const FileDescriptor file = FileDescriptor::open_read(model_path);
  std::string bytes(file.size(), '\0');
  file.read_exact(bytes.data(), bytes.size(), 0, "the tokenizer model");
  return from_serialized(std::move(bytes), model_path);
}

Tokenizer Tokenizer::from_serialized(std::string serialized, std::string label) {
  auto sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
  auto status = sp->LoadFromSerializedProto(serialized);
  ZAYA_CHECK(status.ok(), "{}: cannot load as a SentencePiece tokenizer model ({})", label, status.ToString());
  ZAYA_CHECK(sp->GetPieceSize() > 0, "{}: SentencePiece model has no pieces", label);
  return Tokenizer(std::move(sp), std::move(serialized), std::move(label));
}

TokenizerTrainSummary Tokenizer::train(const TokenizerTrainOptions& o) {
  validate(o);
  std::unordered_map<std::string, std::string> args = {
      {"model_type", o.model_type},
      {"vocab_size", std::to_string(o.vocab_size)},
      {"character_coverage", fmt::format("{}", o.character_coverage)},
      {"input_sentence_size", "0"},  // the iterator samples (seeded)
      {"num_threads", std::to_string(o.num_threads)},
      {"byte_fallback", o.byte_fallback ? "true" : "false"},
      {"max_sentence_length", std::to_string(kMaxSentenceBytes)},
      // Gemma's id layout and piece names.
      {"pad_id", "0"},
      {"eos_id", "1"},
      {"bos_id", "2"},
      {"unk_id", "3"},
      {"pad_piece", "<pad>"},
      {"eos_piece", "<eos>"},
      {"bos_piece", "<bos>"},
      {"unk_piece", "<unk>"},
      // Gemma's text handling: text is tokenized as written (exact round trip),
      // a newline is a piece, digits are single pieces.
      {"user_defined_symbols", "\n"},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "false"},
      {"allow_whitespace_only_pieces", "true"},
      {"split_digits", "true"},
      // SentencePiece logs every step to stderr by default; keep errors only.
      {"minloglevel", "2"},
  };

  const std::vector<CorpusFile> files = expand_corpus_inputs(o.corpus);
  const std::string label = files.size() == 1 ? files[0].path : fmt::format("the corpus ({} files)", files.size());
  const uint64_t available = count_sentences(o.corpus, files);
  ZAYA_CHECK(available > 0, "{}: corpus has no non-blank lines to train a tokenizer on", label);
  const uint64_t wanted = static_cast<uint64_t>(o.max_sentences);
  const double keep_fraction =
      (wanted == 0 || available <= wanted) ? 1.0 : static_cast<double>(wanted) / static_cast<double>(available);

  CorpusLineIterator sentences(o.corpus, files, o.seed, keep_fraction);
  sentences.rethrow_if_failed();
  std::string serialized;
  auto status = sentencepiece::SentencePieceTrainer::Train(args, &sentences, &serialized);
  sentences.rethrow_if_failed();
  ZAYA_CHECK(status.ok(), "{}: SentencePiece {} training (vocab_size {}) failed: {}", label, o.model_type, o.vocab_size,
             status.ToString());

  sentencepiece::SentencePieceProcessor sp;
  status = sp.LoadFromSerializedProto(serialized);
  ZAYA_CHECK(status.ok(), "{}: SentencePiece produced a model it cannot load: {}", label, status.ToString());
  std::string vocab;
  for (int id = 0; id < sp.GetPieceSize(); ++id)
    vocab += fmt::format("{}\t{}\n", escape_piece(sp.IdToPiece(id)), sp.GetScore(id));

  std::filesystem::path prefix(o.output_prefix);
  if (prefix.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(prefix.parent_path(), ec);
    ZAYA_CHECK(!ec, "{}: cannot create directory: {}", prefix.parent_path().string(), ec.message());
  }
  write_file_atomic(o.output_prefix + ".model", serialized);
  write_file_atomic(o.output_prefix + ".vocab", vocab);
  return TokenizerTrainSummary{available, sentences.skipped()};
}

void Tokenizer::check_id(int32_t id, std::string_view what) const {
  ZAYA_CHECK(id >= 0 && id < sp_->GetPieceSize(), "{}: {} {} is outside the vocabulary [0, {})", model_path_, what, id,
             sp_->GetPieceSize());
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  auto status = sp_->Encode(text, &ids);
  ZAYA_CHECK(status.ok(), "{}: encoding {} bytes of text failed: {}", model_path_, text.size(), status.ToString());
  static_assert(sizeof(int) == sizeof(int32_t));
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::string Tokenizer::decode(const int32_t* ids, size_t count) const {
  std::vector<int> v(count);
  for (size_t i = 0; i < count; ++i) {
    ZAYA_CHECK(ids[i] >= 0 && ids[i] < sp_->GetPieceSize(),
               "{}: cannot decode token {} at position {}: outside the vocabulary [0, {})", model_path_, ids[i], i,
               sp_->GetPieceSize());
    v[i] = ids[i];
  }
  std::string text;
  auto status = sp_->Decode(v, &text);
  ZAYA_CHECK(status.ok(), "{}: decoding {} tokens failed: {}", model_path_, count, status.ToString());
  return text;
}

std::string Tokenizer::id_to_piece(int32_t id) const {
  check_id(id, "token id");
  return sp_->IdToPiece(id);
}

int32_t Tokenizer::piece_to_id(std::string_view piece) const { return sp_->PieceToId(piece); }

float Tokenizer::score(int32_t id) const {
  check_id(id, "token id");
  return sp_->GetScore(id);
}

int32_t Tokenizer::piece_type(int32_t id) const {
  check_id(id, "token id");
  return piece_types_[size_t(id)];
}

int32_t Tokenizer::vocab_size() const { return sp_->GetPieceSize(); }
int32_t Tokenizer::bos_id() const { return sp_->bos_id(); }
int32_t Tokenizer::eos_id() const { return sp_->eos_id(); }
int32_t Tokenizer::pad_id() const { return sp_->pad_id(); }
int32_t Tokenizer::unk_id() const { return sp_->unk_id(); }

}  // namespace zaya
