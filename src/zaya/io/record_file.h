#pragma once
// An append-only file of whole records (JSON lines: metrics.jsonl). Each
// record goes out in one write(); if the write fails or is short (a full
// disk), the file is cut back to the end of the last whole record, so it never
// holds half a line, and the record is counted as dropped. A run goes on when
// its metrics cannot be written; it does not go on with a corrupt file.

#include <cstdint>
#include <string>
#include <string_view>

namespace zaya {

class RecordFile {
 public:
  RecordFile() = default;
  // Opens `path` for appending (truncate: start it empty). Throws zaya::Error naming it.
  RecordFile(const std::string& path, bool truncate);
  ~RecordFile();
  RecordFile(RecordFile&& other) noexcept;
  RecordFile& operator=(RecordFile&& other) noexcept;
  RecordFile(const RecordFile&) = delete;
  RecordFile& operator=(const RecordFile&) = delete;

  bool is_open() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }
  // Appends `record` and a newline; false when it could not be written whole
  // (the file is as it was, last_error() says why).
  bool append(std::string_view record);
  int64_t dropped() const { return dropped_; }
  const std::string& last_error() const { return last_error_; }

 private:
  void close() noexcept;
  int fd_ = -1;
  std::string path_;
  int64_t size_ = 0;  // bytes of whole records
  int64_t dropped_ = 0;
  std::string last_error_, line_;
};

// The records of a JSON-lines file that are whole JSON values, in order (a
// crash or a full disk may have left a torn last line); `torn` counts the others.
std::string whole_json_lines(const std::string& text, int64_t* torn = nullptr);

}  // namespace zaya
