#pragma once
// Crash-safe file replacement: write everything to `path.tmp`, fsync it,
// rename it over `path`, then fsync the directory so the rename itself is
// durable. A reader therefore sees either the old file or the complete new
// one, never a torn mix, even after a power loss. If the writer is destroyed
// before commit() (an exception, a failed write), the temporary is removed and
// `path` is untouched.
//
// Two writers targeting the same path at the same time share `path.tmp` and
// will corrupt each other; callers serialise writes to one path.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "zaya/io/file_descriptor.h"

namespace zaya {

class AtomicFileWriter {
 public:
  // Creates (truncates) `path.tmp`. Throws zaya::Error naming the path on failure.
  explicit AtomicFileWriter(std::string path);
  ~AtomicFileWriter();

  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Appends bytes. Small writes are gathered in a buffer; large ones go
  // straight to the file, so callers can stream tensors without a copy.
  void write(const void* data, size_t bytes);
  void write(std::string_view text) { write(text.data(), text.size()); }

  // Bytes appended so far.
  uint64_t size() const { return written_; }

  // Flushes, fsyncs, renames over the final path and fsyncs the directory.
  void commit();

  const std::string& path() const { return path_; }

 private:
  void flush_buffer();
  void discard() noexcept;

  std::string path_;
  std::string tmp_path_;
  FileDescriptor file_;
  std::unique_ptr<char[]> buffer_;
  size_t buffered_ = 0;
  uint64_t written_ = 0;
  bool committed_ = false;
};

// Writes `contents` to `path` atomically (see AtomicFileWriter).
void write_file_atomic(const std::string& path, std::string_view contents);

// Puts `staged` (a complete file or directory, on the same file system) at
// `path` in one step, replacing whatever is there: a plain rename(2) when
// nothing is (or an empty directory is replaced by a directory, or a file by a
// file), else an atomic exchange (renameat2 RENAME_EXCHANGE) after which the
// old contents, now at `staged`, are removed. A reader of `path` sees the old
// or the new, never a mix. Where the file system cannot exchange, the old is
// first renamed aside (so `path` is briefly absent, still never mixed).
void replace_path_atomically(const std::string& staged, const std::string& path);

}  // namespace zaya
