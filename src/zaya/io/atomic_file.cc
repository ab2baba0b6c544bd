#include "zaya/io/atomic_file.h"

#include <unistd.h>

#include <cstring>

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

}  // namespace zaya
