#include "zaya/data/shard_reader.h"

#include <sys/mman.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "zaya/core/error.h"
#include "zaya/data/shard_format.h"
#include "zaya/io/file_descriptor.h"

namespace zaya {
namespace {

// The magic as printable text for error messages (non-printable bytes as \xNN).
std::string printable(const char* bytes, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    auto c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  return out;
}

// Reads and validates NAME.idx into (header, offsets).
void read_index(const std::string& idx_path, ShardIdxHeader& h, std::vector<uint64_t>& offsets) {
  FileDescriptor idx = FileDescriptor::open_read(idx_path);
  const uint64_t idx_bytes = idx.size();
  ZAYA_CHECK(idx_bytes >= kShardIdxHeaderBytes,
             "{}: file is {} bytes, shorter than the {}-byte header (truncated, or not a token index)", idx_path,
             idx_bytes, kShardIdxHeaderBytes);
  idx.read_exact(&h, sizeof(h), 0, "the header");
  ZAYA_CHECK(std::memcmp(h.magic, kShardIdxMagic.data(), sizeof(h.magic)) == 0,
             "{}: magic is '{}', expected '{}' (not a zaya token index)", idx_path, printable(h.magic, sizeof(h.magic)),
             kShardIdxMagic);
  ZAYA_CHECK(h.version == kShardFormatVersion, "{}: format version {} is not supported; expected {}", idx_path,
             h.version, kShardFormatVersion);
  ZAYA_CHECK(h.vocab_size > 0 && h.vocab_size <= static_cast<uint32_t>(INT32_MAX),
             "{}: vocab size {} is outside [1, {}]", idx_path, h.vocab_size, INT32_MAX);
  // Expected size 40 + 8 * (D + 1), checked without overflow for a garbage D.
  const uint64_t offset_bytes = idx_bytes - kShardIdxHeaderBytes;
  ZAYA_CHECK(offset_bytes % sizeof(uint64_t) == 0 && h.num_documents < offset_bytes / sizeof(uint64_t) &&
                 h.num_documents + 1 == offset_bytes / sizeof(uint64_t),
             "{}: number of documents is {}, so the file should be {} + 8 * ({} + 1) bytes, but it is {} bytes "
             "(truncated or corrupt)",
             idx_path, h.num_documents, kShardIdxHeaderBytes, h.num_documents, idx_bytes);
  offsets.resize(h.num_documents + 1);
  idx.read_exact(offsets.data(), offset_bytes, kShardIdxHeaderBytes, "the document offsets");

  ZAYA_CHECK(offsets[0] == 0, "{}: document offset 0 is {}, expected 0", idx_path, offsets[0]);
  for (uint64_t d = 1; d <= h.num_documents; ++d)
    ZAYA_CHECK(offsets[d] >= offsets[d - 1], "{}: document offset {} ({}) is smaller than offset {} ({})", idx_path, d,
               offsets[d], d - 1, offsets[d - 1]);
  ZAYA_CHECK(offsets.back() == h.num_tokens,
             "{}: last document offset (offset {}) is {}, but the header's token count is {}", idx_path,
             h.num_documents, offsets.back(), h.num_tokens);
}

}  // namespace

ShardReader ShardReader::open(const std::string& prefix, const ShardReadOptions& options) {
  ShardReader r;
  r.prefix_ = prefix;
  const std::string idx_path = shard_idx_path(prefix), bin_path = shard_bin_path(prefix);
  ShardIdxHeader h{};
  read_index(idx_path, h, r.offsets_);
  r.vocab_size_ = h.vocab_size;
  r.checksum_ = h.bin_xxh64;

  FileDescriptor bin = FileDescriptor::open_read(bin_path);
  const uint64_t bin_bytes = bin.size();
  ZAYA_CHECK(bin_bytes % kShardTokenBytes == 0 && bin_bytes / kShardTokenBytes == h.num_tokens,
             "{}: file is {} bytes, but {} records {} tokens ({} bytes at {} bytes per token)", bin_path, bin_bytes,
             idx_path, h.num_tokens, h.num_tokens * kShardTokenBytes, kShardTokenBytes);
  if (bin_bytes > 0) {
    void* p = ::mmap(nullptr, bin_bytes, PROT_READ, MAP_PRIVATE, bin.get(), 0);
    ZAYA_CHECK(p != MAP_FAILED, "{}: cannot memory-map {} bytes: {}", bin_path, bin_bytes, std::strerror(errno));
    r.mapping_ = p;
    r.mapping_bytes_ = bin_bytes;
    r.tokens_ = static_cast<const uint32_t*>(p);
  }

  const bool verify = options.verify_checksum == ChecksumMode::kAlways ||
                      (options.verify_checksum == ChecksumMode::kAuto && bin_bytes <= kAutoVerifyMaxBytes);
  if (verify) r.verify_checksum();
  if (options.check_token_ids) r.check_token_ids();
  return r;
}

ShardReader::ShardReader(ShardReader&& other) noexcept
    : prefix_(std::move(other.prefix_)),
      vocab_size_(other.vocab_size_),
      checksum_(other.checksum_),
      offsets_(std::exchange(other.offsets_, std::vector<uint64_t>{0})),
      tokens_(std::exchange(other.tokens_, nullptr)),
      mapping_(std::exchange(other.mapping_, nullptr)),
      mapping_bytes_(std::exchange(other.mapping_bytes_, 0)) {}

ShardReader& ShardReader::operator=(ShardReader&& other) noexcept {
  if (this != &other) {
    unmap();
    prefix_ = std::move(other.prefix_);
    vocab_size_ = other.vocab_size_;
    checksum_ = other.checksum_;
    offsets_ = std::exchange(other.offsets_, std::vector<uint64_t>{0});
    tokens_ = std::exchange(other.tokens_, nullptr);
    mapping_ = std::exchange(other.mapping_, nullptr);
    mapping_bytes_ = std::exchange(other.mapping_bytes_, 0);
  }
  return *this;
}

ShardReader::~ShardReader() { unmap(); }

void ShardReader::unmap() noexcept {
  if (mapping_ != nullptr) ::munmap(mapping_, mapping_bytes_);
  mapping_ = nullptr;
  mapping_bytes_ = 0;
  tokens_ = nullptr;
}

std::string ShardReader::bin_path() const { return shard_bin_path(prefix_); }
std::string ShardReader::idx_path() const { return shard_idx_path(prefix_); }

std::span<const uint32_t> ShardReader::document(uint64_t d) const {
  ZAYA_CHECK(d < num_documents(), "{}: document {} requested, but the shard has {} documents", idx_path(), d,
             num_documents());
  return {tokens_ + offsets_[d], static_cast<size_t>(offsets_[d + 1] - offsets_[d])};
}

void ShardReader::verify_checksum() const {
  uint64_t actual = XXH64(tokens_, mapping_bytes_, 0);
  ZAYA_CHECK(actual == checksum_,
             "{}: xxh64 checksum is {:016x}, but {} records {:016x} (the token file is corrupt or belongs to "
             "another index)",
             bin_path(), actual, idx_path(), checksum_);
}

void ShardReader::check_token_ids() const {
  const uint64_t n = num_tokens();
  for (uint64_t i = 0; i < n; ++i)
    ZAYA_CHECK(tokens_[i] < vocab_size_, "{}: token {} is {}, not below the vocab size {} recorded in {}", bin_path(),
               i, tokens_[i], vocab_size_, idx_path());
}

}  // namespace zaya
