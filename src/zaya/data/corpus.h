#pragma once
// Reading plain-text corpora (docs/formats-data.md, "Corpus format").
//
// A corpus is a UTF-8 text file; documents are separated by one or more blank
// lines (lines holding only spaces, tabs or a carriage return). Inside a
// document, lines are kept and joined with "\n", so a tokenizer that has a
// newline piece (Gemma's does, ours do) sees the document's layout. Windows
// line endings are accepted: a trailing '\r' is dropped from every line.
// Invalid UTF-8 is an error naming the file, line and column, because
// SentencePiece would otherwise silently map it to unknown pieces.

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>

namespace zaya {

// Byte offset of the first invalid UTF-8 sequence in `text` (overlong forms,
// surrogates and code points above U+10FFFF are invalid), or npos if valid.
size_t find_invalid_utf8(std::string_view text);

// Reads a text file line by line, without the line terminator.
class LineReader {
 public:
  explicit LineReader(const std::string& path);

  // Reads the next line into `line` (without "\n" or a trailing "\r");
  // false at end of file. Fails on invalid UTF-8, naming the line and column.
  bool next(std::string& line);

  const std::string& path() const { return path_; }
  // 1-based number of the line last returned (0 before the first).
  uint64_t line_number() const { return line_number_; }

 private:
  std::string path_;
  std::ifstream in_;
  uint64_t line_number_ = 0;
};

// True if `line` holds only spaces, tabs, '\r', '\f' or '\v' (or nothing).
bool is_blank_line(std::string_view line);

struct CorpusDocument {
  std::string text;         // the document's lines joined with "\n", no trailing newline
  uint64_t index = 0;       // 0-based position of the document in the corpus
  uint64_t first_line = 0;  // 1-based line number where the document starts
};

// Yields the documents of a corpus file in order.
class CorpusReader {
 public:
  explicit CorpusReader(const std::string& path) : lines_(path) {}

  // Reads the next document; false when the corpus is exhausted.
  bool next(CorpusDocument& doc);

  const std::string& path() const { return lines_.path(); }

 private:
  LineReader lines_;
  std::string line_;
  uint64_t next_index_ = 0;
};

}  // namespace zaya
