#pragma once
// Reads a token shard (format in shard_format.h and docs/formats-data.md).
//
// open() validates the index completely before handing anything out: magic,
// version, vocab size, that the index file holds exactly num_documents + 1
// offsets, that the offsets start at 0, never decrease and end at the token
// count, that NAME.bin holds exactly that many tokens, and (by default for
// shards up to 1 GiB) the xxh64 checksum of NAME.bin. Every problem is a
// zaya::Error naming the file and the field; a truncated or garbage file is
// never read out of bounds. NAME.bin is memory-mapped read-only; the shard
// must not be modified while a reader has it open (truncating a mapped file
// makes later reads fault).

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace zaya {

enum class ChecksumMode {
  kAuto,    // verify when NAME.bin is at most ShardReader::kAutoVerifyMaxBytes
  kAlways,  // always verify (reads the whole file once)
  kNever,   // trust the file (structure is still validated)
};

struct ShardReadOptions {
  ChecksumMode verify_checksum = ChecksumMode::kAuto;
  // Scan every token and fail on an id >= the vocab size in the header.
  bool check_token_ids = false;
};

class ShardReader {
 public:
  static constexpr uint64_t kAutoVerifyMaxBytes = uint64_t{1} << 30;

  // Opens PREFIX.bin and PREFIX.idx.
  static ShardReader open(const std::string& prefix, const ShardReadOptions& options = {});

  ShardReader(ShardReader&& other) noexcept;
  ShardReader& operator=(ShardReader&& other) noexcept;
  ShardReader(const ShardReader&) = delete;
  ShardReader& operator=(const ShardReader&) = delete;
  ~ShardReader();

  const std::string& prefix() const { return prefix_; }
  std::string bin_path() const;
  std::string idx_path() const;

  uint32_t vocab_size() const { return vocab_size_; }
  uint64_t num_documents() const { return offsets_.size() - 1; }
  uint64_t num_tokens() const { return offsets_.back(); }
  uint64_t checksum() const { return checksum_; }

  // All tokens of the shard, num_tokens() of them (documents back to back).
  const uint32_t* tokens() const { return tokens_; }
  // The tokens of document `d` (< num_documents()).
  std::span<const uint32_t> document(uint64_t d) const;
  // Document start offsets, num_documents() + 1 entries.
  const std::vector<uint64_t>& offsets() const { return offsets_; }

  // Recomputes the xxh64 of NAME.bin; fails if it differs from the index.
  void verify_checksum() const;
  // Fails naming the first token id >= vocab_size().
  void check_token_ids() const;

 private:
  ShardReader() = default;
  void unmap() noexcept;

  std::string prefix_;
  uint32_t vocab_size_ = 0;
  uint64_t checksum_ = 0;
  std::vector<uint64_t> offsets_{0};
  const uint32_t* tokens_ = nullptr;
  void* mapping_ = nullptr;
  size_t mapping_bytes_ = 0;
};

}  // namespace zaya
