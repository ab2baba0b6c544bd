#pragma once
// Reads and validates a Megatron-LM index file NAME.idx (megatron_format.h).

#include <cstdint>
#include <string>
#include <vector>

namespace zaya {

struct MegatronIndex {
  uint8_t dtype = 0;
  uint32_t token_bytes = 0;  // 1, 2 or 4
  uint64_t sequences = 0;
  // Token offset of each document's first token, documents + 1 entries, the
  // last the total token count.
  std::vector<uint64_t> document_offsets;
};

// Fails, naming the file and the field, on a wrong magic or version, a dtype
// other than uint8/int16/uint16/int32, a file size that disagrees with the
// counts, a negative length, sequences that do not lie back to back from byte
// 0 (Megatron's writer always lays them out so), or document indices that do
// not run from 0 to the sequence count without decreasing.
MegatronIndex read_megatron_index(const std::string& idx_path);

}  // namespace zaya
