#include "zaya/data/compressed_input.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "zaya/core/error.h"

namespace zaya {
namespace {

constexpr size_t kChunkBytes = size_t{1} << 20;

int open_or_fail(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("{}: cannot open corpus for reading: {}", path, std::strerror(errno));
  return fd;
}

// read(2) until `n` bytes or the end of the file; fails on an error.
size_t read_some(int fd, char* data, size_t n, const std::string& path) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::read(fd, data + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) fail("{}: read error: {}", path, std::strerror(errno));
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return got;
}

}  // namespace

class CompressedLineReader::Source {
 public:
  virtual ~Source() = default;
  // Appends up to about kChunkBytes of decompressed text; false at the end.
  virtual bool read(std::string& out) = 0;
  virtual uint64_t consumed() const = 0;
};

namespace {

class PlainSource : public CompressedLineReader::Source {
 public:
  explicit PlainSource(const std::string& path) : path_(path), fd_(open_or_fail(path)) {}
  ~PlainSource() override { ::close(fd_); }
  bool read(std::string& out) override {
    const size_t old = out.size();
    out.resize(old + kChunkBytes);
    const size_t got = read_some(fd_, out.data() + old, kChunkBytes, path_);
    out.resize(old + got);
    consumed_ += got;
    return got > 0;
  }
  uint64_t consumed() const override { return consumed_; }

 private:
  std::string path_;
  int fd_;
  uint64_t consumed_ = 0;
};

class GzipSource : public CompressedLineReader::Source {
 public:
  explicit GzipSource(const std::string& path) : path_(path) {
    const int fd = open_or_fail(path);
    gz_ = ::gzdopen(fd, "rb");
    if (gz_ == nullptr) {
      ::close(fd);
      fail("{}: cannot start gzip decompression (out of memory)", path);
    }
    ::gzbuffer(gz_, 1 << 18);
  }
  ~GzipSource() override { ::gzclose(gz_); }
  bool read(std::string& out) override {
    const size_t old = out.size();
    out.resize(old + kChunkBytes);
    const int got = ::gzread(gz_, out.data() + old, static_cast<unsigned>(kChunkBytes));
    if (got < 0) {
      int code = 0;
      const char* what = ::gzerror(gz_, &code);
      fail("{}: gzip data is corrupt or truncated: {}", path_, what != nullptr ? what : "unknown zlib error");
    }
    out.resize(old + static_cast<size_t>(got));
    if (got == 0) {
      int code = 0;
      ::gzerror(gz_, &code);
      if (code != Z_OK && code != Z_BUF_ERROR) fail("{}: gzip read error (zlib code {})", path_, code);
      if (code == Z_BUF_ERROR) fail("{}: gzip data is truncated (the stream ends mid-member)", path_);
    }
    return got > 0;
  }
  uint64_t consumed() const override { return static_cast<uint64_t>(::gzoffset(gz_)); }

 private:
  std::string path_;
  gzFile gz_ = nullptr;
};

class ZstdSource : public CompressedLineReader::Source {
 public:
  explicit ZstdSource(const std::string& path) : path_(path), fd_(open_or_fail(path)), in_(ZSTD_DStreamInSize()) {
    ctx_ = ZSTD_createDCtx();
    if (ctx_ == nullptr) {
      ::close(fd_);
      fail("{}: cannot start zstd decompression (out of memory)", path);
    }
  }
  ~ZstdSource() override {
    ZSTD_freeDCtx(ctx_);
    ::close(fd_);
  }
  bool read(std::string& out) override {
    const size_t old = out.size();
    out.resize(old + kChunkBytes);
    ZSTD_outBuffer o{out.data() + old, kChunkBytes, 0};
    while (o.pos == 0) {
      if (input_.pos == input_.size) {
        const size_t got = read_some(fd_, in_.data(), in_.size(), path_);
        consumed_ += got;
        if (got == 0) {
          ZAYA_CHECK(frame_done_, "{}: zstd data is truncated (the file ends inside a frame)", path_);
          break;
        }
        input_ = ZSTD_inBuffer{in_.data(), got, 0};
      }
      const size_t r = ZSTD_decompressStream(ctx_, &o, &input_);
      ZAYA_CHECK(!ZSTD_isError(r), "{}: zstd data is corrupt: {}", path_, ZSTD_getErrorName(r));
      frame_done_ = (r == 0);
    }
    out.resize(old + o.pos);
    return o.pos > 0;
  }
  uint64_t consumed() const override { return consumed_; }

 private:
  std::string path_;
  int fd_;
  std::vector<char> in_;
  ZSTD_inBuffer input_{nullptr, 0, 0};
  ZSTD_DCtx* ctx_ = nullptr;
  bool frame_done_ = true;
  uint64_t consumed_ = 0;
};

}  // namespace

Compression detect_compression(const std::string& path) {
  const int fd = open_or_fail(path);
  unsigned char magic[4] = {0, 0, 0, 0};
  const size_t got = read_some(fd, reinterpret_cast<char*>(magic), sizeof(magic), path);
  ::close(fd);
  if (got >= 2 && magic[0] == 0x1f && magic[1] == 0x8b) return Compression::kGzip;
  if (got == 4 && magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd)
    return Compression::kZstd;
  return Compression::kNone;
}

const char* compression_name(Compression c) {
  switch (c) {
    case Compression::kGzip: return "gzip";
    case Compression::kZstd: return "zstd";
    case Compression::kNone: break;
  }
  return "none";
}

CompressedLineReader::CompressedLineReader(const std::string& path) : path_(path) {
  switch (detect_compression(path)) {
    case Compression::kGzip: source_ = std::make_unique<GzipSource>(path); break;
    case Compression::kZstd: source_ = std::make_unique<ZstdSource>(path); break;
    case Compression::kNone: source_ = std::make_unique<PlainSource>(path); break;
  }
}

CompressedLineReader::~CompressedLineReader() = default;

uint64_t CompressedLineReader::file_bytes_read() const { return source_->consumed(); }

bool CompressedLineReader::fill() {
  if (eof_) return false;
  buffer_.erase(0, pos_);
  pos_ = 0;
  if (!source_->read(buffer_)) eof_ = true;
  return !eof_;
}

bool CompressedLineReader::next(std::string& line) {
  size_t scanned = pos_;
  for (;;) {
    const size_t nl = buffer_.find('\n', scanned);
    if (nl != std::string::npos) {
      line.assign(buffer_, pos_, nl - pos_);
      pos_ = nl + 1;
      break;
    }
    const size_t kept = buffer_.size() - pos_;
    if (!fill()) {
      if (pos_ == buffer_.size()) return false;
      line.assign(buffer_, pos_, std::string::npos);  // a last line without "\n"
      pos_ = buffer_.size();
      break;
    }
    scanned = kept;  // fill() moved the unread rest to the front
  }
  ++line_number_;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return true;
}

}  // namespace zaya
