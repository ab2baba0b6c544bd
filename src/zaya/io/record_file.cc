#include "zaya/io/record_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>

#include "zaya/core/error.h"

namespace zaya {

RecordFile::RecordFile(const std::string& path, bool truncate) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (truncate ? O_TRUNC : 0), 0644);
  ZAYA_CHECK(fd_ >= 0, "cannot write '{}': {}", path, std::strerror(errno));
  struct stat st {};
  ::fstat(fd_, &st);
  size_ = int64_t(st.st_size);
}

RecordFile::~RecordFile() { close(); }

RecordFile::RecordFile(RecordFile&& o) noexcept { *this = std::move(o); }

RecordFile& RecordFile::operator=(RecordFile&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = std::exchange(o.fd_, -1);
    path_ = std::move(o.path_);
    size_ = o.size_;
    dropped_ = o.dropped_;
    last_error_ = std::move(o.last_error_);
  }
  return *this;
}

void RecordFile::close() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool RecordFile::append(std::string_view record) {
  if (fd_ < 0) return false;
  line_.assign(record);
  line_ += '\n';
  const ssize_t n = ::write(fd_, line_.data(), line_.size());
  if (n == ssize_t(line_.size())) {
    size_ += int64_t(n);
    return true;
  }
  last_error_ = n < 0 ? std::strerror(errno) : "short write (no space left on the device?)";
  // Cut back to the last whole record; if even that fails, end the torn
  // piece with a newline so the next record starts a line of its own (a
  // reader drops the torn one: whole_json_lines).
  if (n > 0 && ::ftruncate(fd_, size_) != 0) {
    const ssize_t nl = ::write(fd_, "\n", 1);
    (void)nl;
    struct stat st {};
    if (::fstat(fd_, &st) == 0) size_ = int64_t(st.st_size);
  }
  ++dropped_;
  return false;
}

std::string whole_json_lines(const std::string& text, int64_t* torn) {
  std::string out;
  int64_t bad = 0;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    const bool last = end == std::string::npos;
    if (last) end = text.size();
    const std::string_view line(text.data() + begin, end - begin);
    begin = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    if (last || !nlohmann::json::accept(line)) {  // a record ends with its newline
      ++bad;
      continue;
    }
    out.append(line);
    out += '\n';
  }
  if (torn != nullptr) *torn = bad;
  return out;
}

}  // namespace zaya
