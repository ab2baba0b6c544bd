#include "zaya/io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "zaya/core/error.h"

namespace zaya {
namespace {

// Large enough that per-tensor header/padding writes rarely hit the kernel,
// small enough not to matter next to the tensors themselves.
constexpr size_t kBufferBytes = size_t{1} << 20;

std::string errno_text() { return std::strerror(errno); }

// fsync on the directory makes a just-completed rename survive a crash
// (POSIX leaves directory-entry durability to the directory's own fsync).
void fsync_directory_of(const std::string& path) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail("{}: cannot open directory to sync it: {}", dir.string(), errno_text());
  int rc = ::fsync(fd);
  int saved = errno;
  ::close(fd);
  // Some file systems (and /proc-like mounts) refuse fsync on directories;
  // the rename has still happened, so only real I/O errors are reported.
  if (rc != 0 && saved != EINVAL && saved != ENOTSUP)
    fail("{}: fsync of directory failed: {}", dir.string(), std::strerror(saved));
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(std::string path) : path_(std::move(path)), tmp_path_(path_ + ".tmp") {
  fd_ = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("{}: cannot create: {}", tmp_path_, errno_text());
  buffer_ = std::make_unique<char[]>(kBufferBytes);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (!committed_) discard();
}

void AtomicFileWriter::discard() noexcept {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  ::unlink(tmp_path_.c_str());
}

void AtomicFileWriter::write_fully(const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd_, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("{}: write failed after {} bytes: {}", tmp_path_, written_, errno_text());
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

void AtomicFileWriter::flush_buffer() {
  if (buffered_ == 0) return;
  write_fully(buffer_.get(), buffered_);
  buffered_ = 0;
}

void AtomicFileWriter::write(const void* data, size_t bytes) {
  ZAYA_ASSERT(fd_ >= 0 && !committed_);
  if (bytes == 0) return;
  if (buffered_ + bytes <= kBufferBytes) {
    std::memcpy(buffer_.get() + buffered_, data, bytes);
    buffered_ += bytes;
  } else {
    flush_buffer();
    if (bytes < kBufferBytes) {
      std::memcpy(buffer_.get(), data, bytes);
      buffered_ = bytes;
    } else {
      write_fully(data, bytes);
    }
  }
  written_ += bytes;
}

void AtomicFileWriter::commit() {
  ZAYA_ASSERT(fd_ >= 0 && !committed_);
  flush_buffer();
  if (::fsync(fd_) != 0) fail("{}: fsync failed: {}", tmp_path_, errno_text());
  int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) fail("{}: close failed: {}", tmp_path_, errno_text());
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0)
    fail("{}: cannot rename {} over it: {}", path_, tmp_path_, errno_text());
  committed_ = true;
  fsync_directory_of(path_);
}

void write_file_atomic(const std::string& path, std::string_view contents) {
  AtomicFileWriter out(path);
  out.write(contents);
  out.commit();
}

}  // namespace zaya
