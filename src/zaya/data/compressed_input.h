#pragma once
// Reads a corpus file as lines, decompressing on the fly (docs/formats-data.md,
// "Corpus inputs").
//
// The compression is recognised by the file's first bytes, not its name:
// 1f 8b is gzip (zlib; concatenated members are read one after another),
// 28 b5 2f fd is zstd (libzstd; concatenated frames likewise), anything else
// is read as it is. Lines are returned without "\n" and without a trailing
// "\r"; the last line need not end in "\n".

#include <cstdint>
#include <memory>
#include <string>

namespace zaya {

enum class Compression { kNone, kGzip, kZstd };

// The compression of `path` from its magic bytes (kNone for a short file).
Compression detect_compression(const std::string& path);
const char* compression_name(Compression c);

class CompressedLineReader {
 public:
  explicit CompressedLineReader(const std::string& path);
  CompressedLineReader(const CompressedLineReader&) = delete;
  CompressedLineReader& operator=(const CompressedLineReader&) = delete;
  ~CompressedLineReader();

  // The next line into `line`; false at the end of the file. A read or
  // decompression error fails naming the file and the line reached.
  bool next(std::string& line);

  const std::string& path() const { return path_; }
  // 1-based number of the line last returned (0 before the first).
  uint64_t line_number() const { return line_number_; }
  // Bytes of the file (compressed) consumed so far: progress against its size.
  uint64_t file_bytes_read() const;

  class Source;  // one decompressor (compressed_input.cc)

 private:
  bool fill();

  std::string path_;
  std::unique_ptr<Source> source_;
  std::string buffer_;
  size_t pos_ = 0;
  bool eof_ = false;
  uint64_t line_number_ = 0;
};

}  // namespace zaya
