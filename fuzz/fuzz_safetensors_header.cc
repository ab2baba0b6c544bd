// Fuzz target: a safetensors file's header and layout (io/safetensors_header.h).
// Any exception other than zaya::Error, any sanitizer report and any broken
// invariant (__builtin_trap) is a finding.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "zaya/core/error.h"
#include "zaya/io/safetensors_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const zaya::SafetensorsLayout layout =
        zaya::parse_safetensors_layout("fuzz.safetensors", std::span<const uint8_t>(data, size));
    if (layout.data_start + layout.data_size != size) __builtin_trap();
    // The parser's promises: every tensor inside the data buffer, exactly
    // numel * dtype size bytes, no two sharing a byte.
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    for (const zaya::SafetensorsTensorInfo& t : layout.tensors) {
      if (t.begin > t.end || t.end > layout.data_size) __builtin_trap();
      if (t.nbytes() != static_cast<uint64_t>(t.numel) * zaya::dtype_size(t.dtype)) __builtin_trap();
      if (t.nbytes() > 0) ranges.emplace_back(t.begin, t.end);
      (void)zaya::format_shape(t.shape);
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i)
      if (ranges[i - 1].second > ranges[i].first) __builtin_trap();
  } catch (const zaya::Error&) {
  }
  return 0;
}
