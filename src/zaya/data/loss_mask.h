#pragma once
// The loss mask of a token shard (docs/formats.md, "Loss masks"): which
// tokens count for the loss when they are a next-token target. Fine-tuning
// data (`zaya data sft`, sft_example.h) selects the assistant's tokens; a
// shard without a mask counts every token, as pretraining does.
//
// The mask is a sidecar NAME.mask beside NAME.bin and NAME.idx (zaya shards or
// Megatron datasets alike), one bit per token:
//
//   offset  size  field
//        0     8  magic "ZAYAMSK1"
//        8     4  format version (1)
//       12     4  reserved, 0
//       16     8  number of tokens T (the shard's)
//       24     8  number of selected tokens (bits set)
//       32     8  xxh64 (seed 0) of the shard's token ids as little-endian
//                 uint32 (for a zaya shard: its NAME.bin, the checksum in NAME.idx)
//       40     8  xxh64 (seed 0) of the mask bytes that follow
//       48  ceil(T/8)  bit i of byte i/8 (least significant first) is token i;
//                 1 = the token counts; the unused bits of the last byte are 0
//
// The reader refuses a mask whose size, token count, selected count, checksum
// or token checksum does not match, naming the file and the field: a mask
// left from another build of the shard is an error, never silently applied.

#include <bit>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <xxhash.h>

#include "zaya/io/file_descriptor.h"

namespace zaya {

inline constexpr std::string_view kLossMaskMagic = "ZAYAMSK1";
inline constexpr uint32_t kLossMaskVersion = 1;
inline constexpr uint64_t kLossMaskHeaderBytes = 48;

// The header as it lies on disk (no padding).
struct LossMaskHeader {
  char magic[8];
  uint32_t version;
  uint32_t reserved;
  uint64_t num_tokens;
  uint64_t num_selected;
  uint64_t tokens_xxh64;
  uint64_t mask_xxh64;
};
static_assert(sizeof(LossMaskHeader) == kLossMaskHeaderBytes);

inline std::string loss_mask_path(const std::string& prefix) { return prefix + ".mask"; }

// A mask held in memory (T / 8 bytes).
class LossMask {
 public:
  LossMask() = default;
  LossMask(std::vector<uint8_t> bits, uint64_t num_tokens, uint64_t num_selected)
      : bits_(std::move(bits)), num_tokens_(num_tokens), num_selected_(num_selected) {}
  // Token i (< num_tokens()) counts for the loss.
  bool selected(uint64_t i) const { return (bits_[i >> 3] >> (i & 7)) & 1u; }
  uint64_t num_tokens() const { return num_tokens_; }
  uint64_t num_selected() const { return num_selected_; }

 private:
  std::vector<uint8_t> bits_;
  uint64_t num_tokens_ = 0, num_selected_ = 0;
};

// Reads and validates PREFIX.mask for a shard of `num_tokens` tokens. The
// header's token checksum must equal `tokens_xxh64` when `check_tokens` (the
// caller knows the shard's checksum); the mask's own checksum and counts are
// always verified.
LossMask read_loss_mask(const std::string& prefix, uint64_t num_tokens, uint64_t tokens_xxh64, bool check_tokens);

// Writes PREFIX.mask in two phases like the shard writers (dataset_writer.h):
// add_document() per document, with the shard's tokens (for the token
// checksum) and one 0/1 per token; prepare() writes and fsyncs PREFIX.mask.tmp,
// commit() renames it into place. Destroyed before commit(), it removes the
// temporary file.
class LossMaskWriter {
 public:
  explicit LossMaskWriter(std::string prefix);
  LossMaskWriter(const LossMaskWriter&) = delete;
  LossMaskWriter& operator=(const LossMaskWriter&) = delete;
  ~LossMaskWriter();

  // Fails when the sizes differ.
  void add_document(std::span<const int32_t> tokens, std::span<const uint8_t> mask);
  void prepare();
  void commit();

  uint64_t num_tokens() const { return tokens_; }
  uint64_t num_selected() const { return selected_; }
  const std::string& prefix() const { return prefix_; }

 private:
  struct HashFree {
    void operator()(XXH64_state_t* s) const { XXH64_freeState(s); }
  };
  std::string prefix_;
  std::vector<uint8_t> bits_;
  std::unique_ptr<XXH64_state_t, HashFree> token_hash_;
  uint64_t tokens_ = 0, selected_ = 0;
  bool prepared_ = false, committed_ = false;
};

}  // namespace zaya
