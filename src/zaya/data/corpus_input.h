#pragma once
// The documents of a corpus given as many files, plain or compressed, in the
// text or the JSON-lines format (docs/formats-data.md, "Corpus inputs").
//
// Reading is split in two so that the expensive half runs in parallel: a
// CorpusRecordReader (one thread) cuts the files into raw records, a text
// document (blank-line separated lines) or one JSONL line, and
// decode_record (any thread) validates a record and yields the document's
// text, or says why the record is bad (invalid UTF-8, invalid JSON, a missing
// field or one that is not a string).

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace zaya {

class CompressedLineReader;

enum class CorpusFormat {
  kAuto,   // per file: JSONL when the name (less .gz/.zst) ends in .jsonl, .ndjson or .json, else text
  kText,   // documents separated by blank lines (corpus.h)
  kJsonl,  // one JSON object per non-blank line, the document is its `field`
};

// "auto", "text" or "jsonl"; fails naming the allowed values.
CorpusFormat parse_corpus_format(const std::string& name);

struct CorpusSpec {
  // Files, directories (every regular file below, recursively, in byte order of
  // the path) and glob patterns (*, ?, [..]; matches sorted), in the order given.
  std::vector<std::string> inputs;
  CorpusFormat format = CorpusFormat::kAuto;
  // JSONL: the document's text, a dotted path into the object ("meta.body").
  std::string field = "text";
  // Skip and count bad records instead of failing on the first.
  bool skip_bad = false;
};

struct CorpusFile {
  std::string path;
  CorpusFormat format = CorpusFormat::kText;  // kText or kJsonl, resolved
  uint64_t bytes = 0;                         // on disk (compressed)
};

// The files of `spec` in reading order; fails on an input that matches no
// file, or when there are none.
std::vector<CorpusFile> expand_corpus_inputs(const CorpusSpec& spec);

// One record as read, not yet validated.
struct CorpusRecord {
  std::string text;   // a text document's lines joined with "\n", or one JSONL line
  uint32_t file = 0;  // index into the file list
  uint64_t line = 0;  // 1-based first line in that file
  bool jsonl = false;
};

class CorpusRecordReader {
 public:
  CorpusRecordReader(std::vector<CorpusFile> files);
  ~CorpusRecordReader();

  // The next record in file order; false when every file is read.
  bool next(CorpusRecord& record);

  const std::vector<CorpusFile>& files() const { return files_; }
  // Compressed bytes consumed over all files (progress).
  uint64_t bytes_read() const;
  uint64_t bytes_total() const { return bytes_total_; }

 private:
  std::vector<CorpusFile> files_;
  size_t current_ = 0;
  std::unique_ptr<CompressedLineReader> reader_;
  std::string line_;
  uint64_t bytes_done_ = 0;  // bytes of the files finished
  uint64_t bytes_total_ = 0;
};

struct DecodedRecord {
  bool ok = false;
  std::string text;   // the document (ok)
  std::string error;  // "FILE: line N: REASON" (not ok)
};

// Validates `record` and extracts its document; `field` is CorpusSpec::field.
DecodedRecord decode_record(CorpusRecord&& record, const std::vector<CorpusFile>& files, const std::string& field);

// A JSONL record's object (fine-tuning data, sft_example.h): the UTF-8 and
// JSON checks of decode_record, without taking a field. Not ok for a text record.
struct DecodedJson {
  bool ok = false;
  nlohmann::json value;
  std::string where;  // "FILE: line N", the prefix of errors about the record
  std::string error;  // "FILE: line N: REASON" (not ok)
};
DecodedJson decode_json_record(CorpusRecord&& record, const std::vector<CorpusFile>& files);

}  // namespace zaya
