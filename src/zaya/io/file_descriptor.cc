#include "zaya/io/file_descriptor.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "zaya/core/error.h"

namespace zaya {

FileDescriptor::FileDescriptor(FileDescriptor&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) {
  other.fd_ = -1;
}

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    other.fd_ = -1;
  }
  return *this;
}

FileDescriptor::~FileDescriptor() {
  if (fd_ >= 0) ::close(fd_);
}

FileDescriptor FileDescriptor::open_read(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("{}: cannot open for reading: {}", path, std::strerror(errno));
  return FileDescriptor(fd, path);
}

FileDescriptor FileDescriptor::create(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("{}: cannot create: {}", path, std::strerror(errno));
  return FileDescriptor(fd, path);
}

size_t FileDescriptor::size() const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) fail("{}: cannot stat: {}", path_, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail("{}: is not a regular file", path_);
  return static_cast<size_t>(st.st_size);
}

void FileDescriptor::write_all(const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd_, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("{}: write failed: {}", path_, std::strerror(errno));
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

void FileDescriptor::read_exact(void* data, size_t bytes, size_t offset, std::string_view what) const {
  char* p = static_cast<char*>(data);
  size_t done = 0;
  while (done < bytes) {
    ssize_t n = ::pread(fd_, p + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("{}: reading {} failed: {}", path_, what, std::strerror(errno));
    }
    if (n == 0) fail("{}: file ends inside {} (at byte {}); the file is truncated", path_, what, offset + done);
    done += static_cast<size_t>(n);
  }
}

void FileDescriptor::sync() {
  if (::fsync(fd_) != 0) fail("{}: fsync failed: {}", path_, std::strerror(errno));
}

void FileDescriptor::close() {
  if (fd_ < 0) return;
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("{}: close failed: {}", path_, std::strerror(errno));
}

void rename_file(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0) fail("{}: cannot rename to {}: {}", from, to, std::strerror(errno));
}

void sync_parent_directory(const std::string& path) {
  // fsync on the directory makes a just-completed rename survive a crash
  // (POSIX leaves directory-entry durability to the directory's own fsync).
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::string dir = parent.empty() ? std::string(".") : parent.string();
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail("{}: cannot open directory to sync it: {}", dir, std::strerror(errno));
  FileDescriptor owned(fd, dir);
  // Some file systems refuse fsync on directories; the rename has happened,
  // so only real I/O errors are reported.
  if (::fsync(fd) != 0 && errno != EINVAL && errno != ENOTSUP)
    fail("{}: fsync of directory failed: {}", dir, std::strerror(errno));
}

}  // namespace zaya
