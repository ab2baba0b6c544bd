#pragma once
// Megatron-LM's indexed dataset (MMapIndexedDataset), as read and written
// here (docs/formats.md, "Megatron indexed datasets").
//
// NAME.bin holds the token ids of every sequence back to back, in the dtype
// named by the index. NAME.idx, all little-endian:
//   offset      size   field
//        0         9   magic "MMIDIDX\0\0"
//        9         8   version, uint64 = 1
//       17         1   dtype code, uint8 (table below)
//       18         8   S = number of sequences, uint64
//       26         8   C = number of document indices, uint64 (documents + 1)
//       34        4S   sequence lengths in tokens, int32
//    34+4S        8S   sequence pointers: byte offset of each sequence in NAME.bin, int64
//   34+12S        8C   document indices: document d is sequences [i_d, i_{d+1}), int64,
//                      i_0 = 0 and i_{C-1} = S
// (Megatron's multimodal variant appends S int8 sequence modes; not supported.)

#include <cstdint>
#include <string_view>

namespace zaya {

inline constexpr std::string_view kMegatronIdxMagic{"MMIDIDX\0\0", 9};
inline constexpr uint64_t kMegatronVersion = 1;
inline constexpr uint64_t kMegatronHeaderBytes = 34;

// Megatron's dtype codes (numpy types).
enum MegatronDtype : uint8_t {
  kMegatronUint8 = 1,
  kMegatronInt8 = 2,
  kMegatronInt16 = 3,
  kMegatronInt32 = 4,
  kMegatronInt64 = 5,
  kMegatronFloat64 = 6,
  kMegatronFloat32 = 7,
  kMegatronUint16 = 8,
};

// Bytes per token of the integer dtypes zaya reads (uint8, int16, int32,
// uint16), 0 for the others (int8, int64, floats).
inline constexpr uint32_t megatron_token_bytes(uint8_t code) {
  switch (code) {
    case kMegatronUint8: return 1;
    case kMegatronInt16:
    case kMegatronUint16: return 2;
    case kMegatronInt32: return 4;
    default: return 0;
  }
}

// The dtype Megatron's preprocessing picks: uint16 below 65500 ids, else int32.
inline constexpr uint8_t megatron_dtype_for_vocab(uint32_t vocab_size) {
  return vocab_size < 65500 ? kMegatronUint16 : kMegatronInt32;
}

}  // namespace zaya
