#pragma once
// Token shard format (docs/formats-data.md, "Token shards"), shared by the
// writer and the reader.
//
// A shard NAME is two files:
//   NAME.bin  the token ids of all documents, back to back, as little-endian
//             uint32 (4 bytes per token: vocabularies exceed 65535 ids).
//   NAME.idx  a 40-byte header followed by num_documents + 1 little-endian
//             uint64 document start offsets, counted in tokens:
//               offset  size  field
//                    0     8  magic "ZAYAIDX1"
//                    8     4  format version (1)
//                   12     4  vocab size of the tokenizer that wrote the shard
//                   16     8  number of documents
//                   24     8  total number of tokens (= NAME.bin size / 4)
//                   32     8  xxh64 (seed 0) of the NAME.bin bytes
//                   40  8(D+1) document offsets: 0 = o_0 <= o_1 <= ... <= o_D = tokens
//             Document d is tokens [o_d, o_{d+1}).

#include <bit>
#include <cstdint>
#include <string>
#include <string_view>

namespace zaya {

static_assert(std::endian::native == std::endian::little,
              "token shards are little-endian and are read and written in place");

inline constexpr std::string_view kShardIdxMagic = "ZAYAIDX1";
inline constexpr uint32_t kShardFormatVersion = 1;
inline constexpr uint64_t kShardIdxHeaderBytes = 40;
inline constexpr uint64_t kShardTokenBytes = sizeof(uint32_t);

// The header as it lies on disk (no padding: 8 + 4 + 4 + 8 + 8 + 8 bytes).
struct ShardIdxHeader {
  char magic[8];
  uint32_t version;
  uint32_t vocab_size;
  uint64_t num_documents;
  uint64_t num_tokens;
  uint64_t bin_xxh64;
};
static_assert(sizeof(ShardIdxHeader) == kShardIdxHeaderBytes);

inline std::string shard_bin_path(const std::string& prefix) { return prefix + ".bin"; }
inline std::string shard_idx_path(const std::string& prefix) { return prefix + ".idx"; }

}  // namespace zaya
