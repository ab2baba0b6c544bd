#include "zaya/data/shard_reader.h"

#include <sys/mman.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "zaya/core/error.h"
#include "zaya/data/megatron_format.h"
#include "zaya/data/megatron_index.h"
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

ShardFileFormat shard_file_format(const std::string& prefix) {
  char magic[9] = {};
  const FileDescriptor idx = FileDescriptor::open_read(shard_idx_path(prefix));
  if (idx.size() >= sizeof(magic)) idx.read_exact(magic, sizeof(magic), 0, "the magic");
  return std::string_view(magic, sizeof(magic)) == kMegatronIdxMagic ? ShardFileFormat::kMegatron
                                                                     : ShardFileFormat::kZaya;
}

ShardReader ShardReader::open(const std::string& prefix, const ShardReadOptions& options) {
  ShardReader r;
  r.prefix_ = prefix;
  if (shard_file_format(prefix) == ShardFileFormat::kMegatron) {
    r.open_megatron(options);
  } else {
    r.open_zaya(options);
  }
  r.open_mask(options);
  return r;
}

void ShardReader::map_bin(uint64_t expected_bytes) {
  const std::string bin_path = shard_bin_path(prefix_);
  FileDescriptor bin = FileDescriptor::open_read(bin_path);
  const uint64_t bin_bytes = bin.size();
  ZAYA_CHECK(bin_bytes == expected_bytes,
             "{}: file is {} bytes, but {} records {} tokens ({} bytes at {} bytes per token)", bin_path, bin_bytes,
             shard_idx_path(prefix_), num_tokens(), expected_bytes, token_bytes_);
  if (bin_bytes > 0) {
    void* p = ::mmap(nullptr, bin_bytes, PROT_READ, MAP_PRIVATE, bin.get(), 0);
    ZAYA_CHECK(p != MAP_FAILED, "{}: cannot memory-map {} bytes: {}", bin_path, bin_bytes, std::strerror(errno));
    mapping_ = p;
    mapping_bytes_ = bin_bytes;
    data_ = static_cast<const unsigned char*>(p);
  }
}

void ShardReader::open_zaya(const ShardReadOptions& options) {
  ShardIdxHeader h{};
  read_index(shard_idx_path(prefix_), h, offsets_);
  vocab_size_ = h.vocab_size;
  checksum_ = h.bin_xxh64;
  ZAYA_CHECK(h.num_tokens <= UINT64_MAX / kShardTokenBytes, "{}: token count {} is too large", shard_idx_path(prefix_),
             h.num_tokens);
  map_bin(h.num_tokens * kShardTokenBytes);
  const bool verify = options.verify_checksum == ChecksumMode::kAlways ||
                      (options.verify_checksum == ChecksumMode::kAuto && mapping_bytes_ <= kAutoVerifyMaxBytes);
  if (verify) verify_checksum();
  if (options.check_token_ids) check_token_ids();
}

void ShardReader::open_megatron(const ShardReadOptions& options) {
  format_ = ShardFileFormat::kMegatron;
  const std::string idx_path = shard_idx_path(prefix_);
  MegatronIndex index = read_megatron_index(idx_path);
  token_bytes_ = index.token_bytes;
  offsets_ = std::move(index.document_offsets);
  map_bin(num_tokens() * token_bytes_);
  if (options.vocab_size > 0) {
    ZAYA_CHECK(options.vocab_size <= static_cast<uint32_t>(INT32_MAX), "{}: vocab size {} is outside [1, {}]", idx_path,
               options.vocab_size, INT32_MAX);
    vocab_size_ = options.vocab_size;
    if (options.check_token_ids) check_token_ids();
  } else {
    uint32_t top = 0;
    for (uint64_t i = 0; i < num_tokens(); ++i) top = std::max(top, token(i));
    ZAYA_CHECK(top < static_cast<uint32_t>(INT32_MAX), "{}: token id {} is not a valid id (the dtype is signed)",
               shard_bin_path(prefix_), top);
    vocab_size_ = top + 1;
  }
}

void ShardReader::open_mask(const ShardReadOptions& options) {
  std::error_code ec;
  if (!options.loss_mask || !std::filesystem::exists(loss_mask_path(prefix_), ec)) return;
  uint64_t tokens_xxh64 = checksum_;
  bool check = format_ == ShardFileFormat::kZaya;
  if (!check && options.verify_checksum != ChecksumMode::kNever) {
    // A Megatron dataset records no checksum: hash its ids as uint32, as the mask writer did.
    XXH64_state_t* state = XXH64_createState();
    ZAYA_CHECK(state != nullptr, "{}: out of memory creating the checksum state", loss_mask_path(prefix_));
    XXH64_reset(state, 0);
    constexpr uint64_t kBlock = 1 << 16;
    std::vector<uint32_t> block(kBlock);
    for (uint64_t at = 0; at < num_tokens(); at += kBlock) {
      const uint64_t n = std::min(kBlock, num_tokens() - at);
      read_tokens(at, n, block.data());
      XXH64_update(state, block.data(), n * sizeof(uint32_t));
    }
    tokens_xxh64 = XXH64_digest(state);
    XXH64_freeState(state);
    check = true;
  }
  mask_ = read_loss_mask(prefix_, num_tokens(), tokens_xxh64, check);
  has_mask_ = true;
}

ShardReader::ShardReader(ShardReader&& other) noexcept
    : prefix_(std::move(other.prefix_)),
      vocab_size_(other.vocab_size_),
      checksum_(other.checksum_),
      offsets_(std::exchange(other.offsets_, std::vector<uint64_t>{0})),
      format_(other.format_),
      token_bytes_(other.token_bytes_),
      data_(std::exchange(other.data_, nullptr)),
      mapping_(std::exchange(other.mapping_, nullptr)),
      mapping_bytes_(std::exchange(other.mapping_bytes_, 0)),
      has_mask_(std::exchange(other.has_mask_, false)),
      mask_(std::move(other.mask_)) {}

ShardReader& ShardReader::operator=(ShardReader&& other) noexcept {
  if (this != &other) {
    unmap();
    prefix_ = std::move(other.prefix_);
    vocab_size_ = other.vocab_size_;
    checksum_ = other.checksum_;
    offsets_ = std::exchange(other.offsets_, std::vector<uint64_t>{0});
    format_ = other.format_;
    token_bytes_ = other.token_bytes_;
    data_ = std::exchange(other.data_, nullptr);
    mapping_ = std::exchange(other.mapping_, nullptr);
    mapping_bytes_ = std::exchange(other.mapping_bytes_, 0);
    has_mask_ = std::exchange(other.has_mask_, false);
    mask_ = std::move(other.mask_);
  }
  return *this;
}

ShardReader::~ShardReader() { unmap(); }

void ShardReader::unmap() noexcept {
  if (mapping_ != nullptr) ::munmap(mapping_, mapping_bytes_);
  mapping_ = nullptr;
  mapping_bytes_ = 0;
  data_ = nullptr;
}

std::string ShardReader::bin_path() const { return shard_bin_path(prefix_); }
std::string ShardReader::idx_path() const { return shard_idx_path(prefix_); }

const uint32_t* ShardReader::tokens() const {
  ZAYA_CHECK(token_bytes_ == 4, "{}: tokens are {} bytes wide; read them with read_tokens()", bin_path(), token_bytes_);
  return reinterpret_cast<const uint32_t*>(data_);
}

uint32_t ShardReader::token(uint64_t i) const {
  ZAYA_ASSERT(i < num_tokens());
  switch (token_bytes_) {
    case 1: return data_[i];
    case 2: {
      uint16_t v;
      std::memcpy(&v, data_ + 2 * i, 2);
      return v;
    }
    default: {
      uint32_t v;
      std::memcpy(&v, data_ + 4 * i, 4);
      return v;
    }
  }
}

void ShardReader::read_tokens(uint64_t start, uint64_t count, uint32_t* out) const {
  ZAYA_CHECK(start <= num_tokens() && count <= num_tokens() - start,
             "{}: tokens {}..{} requested, but the shard has {} tokens", bin_path(), start, start + count,
             num_tokens());
  if (count == 0) return;
  switch (token_bytes_) {
    case 1:
      for (uint64_t i = 0; i < count; ++i) out[i] = data_[start + i];
      break;
    case 2: {
      const unsigned char* p = data_ + 2 * start;
      for (uint64_t i = 0; i < count; ++i) {
        uint16_t v;
        std::memcpy(&v, p + 2 * i, 2);
        out[i] = v;
      }
      break;
    }
    default: std::memcpy(out, data_ + 4 * start, count * 4);
  }
}

std::vector<uint32_t> ShardReader::document(uint64_t d) const {
  ZAYA_CHECK(d < num_documents(), "{}: document {} requested, but the shard has {} documents", idx_path(), d,
             num_documents());
  std::vector<uint32_t> out(offsets_[d + 1] - offsets_[d]);
  read_tokens(offsets_[d], out.size(), out.data());
  return out;
}

void ShardReader::verify_checksum() const {
  if (format_ == ShardFileFormat::kMegatron) return;  // Megatron's index has no checksum
  uint64_t actual = XXH64(data_, mapping_bytes_, 0);
  ZAYA_CHECK(actual == checksum_,
             "{}: xxh64 checksum is {:016x}, but {} records {:016x} (the token file is corrupt or belongs to "
             "another index)",
             bin_path(), actual, idx_path(), checksum_);
}

void ShardReader::check_token_ids() const {
  const uint64_t n = num_tokens();
  for (uint64_t i = 0; i < n; ++i) {
    const uint32_t t = token(i);
    ZAYA_CHECK(t < vocab_size_, "{}: token {} is {}, not below the vocab size {} recorded in {}", bin_path(), i, t,
               vocab_size_, format_ == ShardFileFormat::kMegatron ? "the options" : idx_path());
  }
}

}  // namespace zaya
