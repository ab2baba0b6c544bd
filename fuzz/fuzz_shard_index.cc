// Fuzz target: a token shard (data/shard_reader.h), both files fuzzed. The
// input is split as: 1 flag byte (bit 0: verify the checksum, bit 1: check
// token ids), a little-endian u16 length L, L bytes of NAME.idx, and the rest
// as NAME.bin. Every document the opened shard offers is read.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "zaya/core/error.h"
#include "zaya/data/shard_format.h"
#include "zaya/data/shard_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const uint8_t flags = data[0];
  const size_t idx_len = std::min<size_t>(size - 3, size_t{data[1]} | (size_t{data[2]} << 8));
  const std::string prefix = zaya::fuzz::scratch_dir() + "/shard";
  zaya::fuzz::write_bytes(zaya::shard_idx_path(prefix), data + 3, idx_len);
  zaya::fuzz::write_bytes(zaya::shard_bin_path(prefix), data + 3 + idx_len, size - 3 - idx_len);

  zaya::ShardReadOptions options;
  options.verify_checksum = (flags & 1) ? zaya::ChecksumMode::kAlways : zaya::ChecksumMode::kNever;
  options.check_token_ids = (flags & 2) != 0;
  try {
    const zaya::ShardReader reader = zaya::ShardReader::open(prefix, options);
    const uint64_t n = reader.num_tokens();
    if (reader.offsets().size() != reader.num_documents() + 1) __builtin_trap();
    uint64_t sum = 0;
    for (uint64_t d = 0; d < reader.num_documents(); ++d) {
      // document() copies the document's tokens (any stored width): exactly its offsets' span.
      const auto doc = reader.document(d);
      if (doc.size() != reader.offsets()[d + 1] - reader.offsets()[d] || reader.offsets()[d + 1] > n) __builtin_trap();
      for (uint32_t t : doc) sum += t;  // touch every token
    }
    if (n > 0 && sum == UINT64_MAX) __builtin_trap();  // keeps the reads alive
    try {
      reader.check_token_ids();
    } catch (const zaya::Error&) {
    }
  } catch (const zaya::Error&) {
  }
  return 0;
}
