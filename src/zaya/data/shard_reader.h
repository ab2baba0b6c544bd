#pragma once
// Reads a token shard (format in shard_format.h and docs/formats-data.md) or a
// Megatron-LM indexed dataset (megatron_format.h, docs/formats.md), told
// apart by the magic at the start of NAME.idx.
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
//
// A Megatron dataset's tokens are 1, 2 or 4 bytes wide (its dtype); its
// sequences must lie back to back in NAME.bin (as Megatron writes them), and
// a zaya "document" is a Megatron document (document indices). It has no
// vocabulary size or checksum: ShardReadOptions::vocab_size supplies the
// former (0: the largest id + 1, which scans the tokens once).
//
// A shard of either format may have a loss mask, NAME.mask (loss_mask.h):
// when the file exists, open() reads and validates it too (its token count,
// its checksum, and that it was written for these tokens: the index's checksum
// for a zaya shard; for a Megatron dataset the tokens are hashed when the
// checksum is verified), and loss_selected() says which tokens count
// (unless ShardReadOptions::loss_mask is false).

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "zaya/data/loss_mask.h"

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
  // Megatron datasets only: the vocabulary the ids must stay below (0: the
  // largest id in the file + 1). Ignored for zaya shards (their header has it).
  uint32_t vocab_size = 0;
  // Read NAME.mask when it exists; false: ignore the file (every token counts,
  // as `zaya eval --no-loss-mask` wants).
  bool loss_mask = true;
};

enum class ShardFileFormat { kZaya, kMegatron };

// The format of PREFIX.idx from its magic: kMegatron for "MMIDIDX\0\0",
// kZaya for anything else (ShardReader::open then validates it).
ShardFileFormat shard_file_format(const std::string& prefix);

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

  ShardFileFormat format() const { return format_; }
  // Bytes per token in NAME.bin: 4 for zaya shards, 1, 2 or 4 for Megatron's.
  uint32_t token_bytes() const { return token_bytes_; }
  // NAME.bin as mapped (num_tokens() * token_bytes() bytes, little-endian ids).
  const unsigned char* data() const { return data_; }
  // All tokens of the shard when they are 4 bytes wide (fails otherwise; use
  // read_tokens or token for any width).
  const uint32_t* tokens() const;
  // Token i (< num_tokens()), any width.
  uint32_t token(uint64_t i) const;
  // Copies tokens [start, start + count) (inside the shard) into `out`.
  void read_tokens(uint64_t start, uint64_t count, uint32_t* out) const;
  // The tokens of document `d` (< num_documents()).
  std::vector<uint32_t> document(uint64_t d) const;
  // Document start offsets, num_documents() + 1 entries.
  const std::vector<uint64_t>& offsets() const { return offsets_; }

  // Recomputes the xxh64 of NAME.bin; fails if it differs from the index.
  void verify_checksum() const;
  // Fails naming the first token id >= vocab_size().
  void check_token_ids() const;

  // NAME.mask exists (and was valid): some tokens do not count for the loss.
  bool has_loss_mask() const { return has_mask_; }
  // Token i (< num_tokens()) counts for the loss: always true without a mask.
  bool loss_selected(uint64_t i) const { return !has_mask_ || mask_.selected(i); }
  // Tokens that count for the loss (num_tokens() without a mask).
  uint64_t loss_tokens() const { return has_mask_ ? mask_.num_selected() : num_tokens(); }

 private:
  ShardReader() = default;
  void unmap() noexcept;
  void open_zaya(const ShardReadOptions& options);
  void open_megatron(const ShardReadOptions& options);
  void map_bin(uint64_t bytes);
  void open_mask(const ShardReadOptions& options);

  std::string prefix_;
  uint32_t vocab_size_ = 0;
  uint64_t checksum_ = 0;
  std::vector<uint64_t> offsets_{0};
  ShardFileFormat format_ = ShardFileFormat::kZaya;
  uint32_t token_bytes_ = 4;
  const unsigned char* data_ = nullptr;
  void* mapping_ = nullptr;
  size_t mapping_bytes_ = 0;
  bool has_mask_ = false;
  LossMask mask_;
};

}  // namespace zaya
