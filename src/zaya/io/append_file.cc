#include "zaya/io/append_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "zaya/core/error.h"

namespace zaya {

void append_line(const std::string& path, const std::string& line) {
  const std::string text = line + "\n";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  ZAYA_CHECK(fd >= 0, "{}: cannot open for appending: {}", path, std::strerror(errno));
  const ssize_t n = ::write(fd, text.data(), text.size());
  const int err = errno;
  ::close(fd);
  ZAYA_CHECK(n == ssize_t(text.size()), "{}: append failed: {}", path, std::strerror(err));
}

}  // namespace zaya
