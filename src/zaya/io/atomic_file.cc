#include "zaya/io/atomic_file.h"

#include <fcntl.h>
#include <stdio.h>
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

}  // namespace

AtomicFileWriter::AtomicFileWriter(std::string path)
    : path_(std::move(path)), tmp_path_(path_ + ".tmp"), file_(FileDescriptor::create(tmp_path_)) {
  buffer_ = std::make_unique<char[]>(kBufferBytes);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (!committed_) discard();
}

void AtomicFileWriter::discard() noexcept {
  file_ = FileDescriptor();  // closes
  ::unlink(tmp_path_.c_str());
}

void AtomicFileWriter::flush_buffer() {
  if (buffered_ == 0) return;
  file_.write_all(buffer_.get(), buffered_);
  buffered_ = 0;
}

void AtomicFileWriter::write(const void* data, size_t bytes) {
  ZAYA_ASSERT(file_.is_open() && !committed_);
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
      file_.write_all(data, bytes);
    }
  }
  written_ += bytes;
}

void AtomicFileWriter::commit() {
  ZAYA_ASSERT(file_.is_open() && !committed_);
  flush_buffer();
  file_.sync();
  file_.close();
  rename_file(tmp_path_, path_);
  committed_ = true;
  sync_parent_directory(path_);
}

void write_file_atomic(const std::string& path, std::string_view contents) {
  AtomicFileWriter out(path);
  out.write(contents);
  out.commit();
}

void replace_path_atomically(const std::string& staged, const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status old = fs::symlink_status(path, ec);
  const bool plain = !fs::exists(old) ||
                     (fs::is_directory(old) && fs::is_directory(staged, ec) && fs::is_empty(path, ec)) ||
                     (fs::is_regular_file(old) && !fs::is_directory(staged, ec));
  if (plain) {
    rename_file(staged, path);
  } else if (::renameat2(AT_FDCWD, staged.c_str(), AT_FDCWD, path.c_str(), RENAME_EXCHANGE) == 0) {
    fs::remove_all(staged, ec);  // the old contents; a failure leaves them there, the new are in place
  } else if (errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP) {
    // Set aside under the staged path's own (unique) name: nothing of the user's is ever removed but `path`.
    const std::string aside = staged + ".replaced";
    if (fs::exists(fs::symlink_status(aside, ec))) fail("{}: cannot set {} aside: {} exists", staged, path, aside);
    rename_file(path, aside);
    rename_file(staged, path);
    fs::remove_all(aside, ec);
  } else {
    fail("{}: cannot exchange with {}: {}", staged, path, std::strerror(errno));
  }
  sync_parent_directory(path);
}

}  // namespace zaya
