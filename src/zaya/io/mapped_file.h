#pragma once
// A whole file mapped read-only into memory (mmap, MAP_PRIVATE). Pages are
// read on first touch, so opening a 100 GB checkpoint costs nothing until
// tensors are read, and several readers share the page cache.
//
// Caveat of every mmap reader: if another process truncates the file while it
// is mapped, touching the lost pages raises SIGBUS. Checkpoints are written by
// atomic rename (AtomicFileWriter), which never truncates a file in place.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace zaya {

class MappedFile {
 public:
  MappedFile() = default;
  // Maps `path`; throws zaya::Error if it cannot be opened, is not a regular
  // file or cannot be mapped. An empty file maps to an empty span.
  explicit MappedFile(const std::string& path);
  ~MappedFile();

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  void unmap() noexcept;

  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace zaya
