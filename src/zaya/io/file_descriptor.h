#pragma once
// Small POSIX file helpers: an owning descriptor, complete writes, fsync and
// atomic rename (whole-file atomic writes: io/atomic_file.h). Every failure becomes a
// zaya::Error that names the file and the operation, with errno's text.

#include <cstddef>
#include <string>
#include <string_view>

namespace zaya {

// An owned file descriptor, closed on destruction.
class FileDescriptor {
 public:
  FileDescriptor() = default;
  FileDescriptor(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  FileDescriptor(FileDescriptor&& other) noexcept;
  FileDescriptor& operator=(FileDescriptor&& other) noexcept;
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor();

  // Opens for reading; fails with "PATH: cannot open for reading: REASON".
  static FileDescriptor open_read(const std::string& path);
  // Creates or truncates for writing (mode 0644).
  static FileDescriptor create(const std::string& path);

  int get() const { return fd_; }
  const std::string& path() const { return path_; }
  bool is_open() const { return fd_ >= 0; }

  // Size in bytes (fstat).
  size_t size() const;
  // Writes all `bytes`, retrying short writes and EINTR.
  void write_all(const void* data, size_t bytes);
  // Reads exactly `bytes` at `offset`; fails naming `what` if the file is shorter.
  void read_exact(void* data, size_t bytes, size_t offset, std::string_view what) const;
  // Flushes the file's data and metadata to stable storage.
  void sync();
  // Closes now, reporting a failed close (which can carry a deferred write error).
  void close();

 private:
  int fd_ = -1;
  std::string path_;
};

// Renames `from` to `to`, replacing `to` atomically (POSIX rename).
void rename_file(const std::string& from, const std::string& to);

// fsyncs the directory holding `path`, so that a rename into it is durable.
void sync_parent_directory(const std::string& path);

}  // namespace zaya
