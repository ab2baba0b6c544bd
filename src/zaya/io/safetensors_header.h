#pragma once
// Parsing and validation of a safetensors file's layout: the 8-byte header
// length, the JSON header and every tensor's byte range in the data buffer.
//
// This is the code that faces hostile input (downloaded checkpoints, and a
// fuzz target), so it works on a byte span with no file I/O, checks every
// field before any arithmetic uses it, and reports each problem as a
// zaya::Error naming the file, the tensor and the field. Once it returns, every
// tensor's [begin, end) lies inside the data buffer, has exactly
// numel * dtype_size bytes and shares no byte with another tensor, so readers
// can index the buffer without further checks. See docs/formats-safetensors.md.

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "zaya/io/safetensors_dtype.h"

namespace zaya {

// The reference implementation's limit; real headers are a few MB at most.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

struct SafetensorsTensorInfo {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::kF32;
  std::vector<int64_t> shape;  // row-major, outermost first; empty for a scalar
  int64_t numel = 0;
  uint64_t begin = 0;  // byte offsets relative to the start of the data buffer
  uint64_t end = 0;

  uint64_t nbytes() const { return end - begin; }
};

struct SafetensorsLayout {
  std::vector<SafetensorsTensorInfo> tensors;   // in header order
  std::map<std::string, std::string> metadata;  // the optional "__metadata__" object
  uint64_t data_start = 0;                      // file offset of the data buffer (8 + header length)
  uint64_t data_size = 0;                       // bytes from data_start to the end of the file
};

// Validates `file` (the complete file contents) and returns its layout.
// `label` names the file in error messages (usually its path).
SafetensorsLayout parse_safetensors_layout(std::string_view label, std::span<const uint8_t> file);

// "[2, 3]" (for messages).
std::string format_shape(const std::vector<int64_t>& shape);

}  // namespace zaya
