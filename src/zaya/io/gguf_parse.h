#pragma once
// Parsing and validation of a GGUF file's layout: header, metadata, tensor
// infos and every tensor's byte range in the data section.
//
// This parser faces hostile files (downloads, and a fuzz target), so it works
// on a byte span with no I/O, checks every length against the bytes left
// before it allocates or reads, and reports each problem as a zaya::Error
// naming the file, the key or tensor and the field. Once it returns:
//  - every tensor has a known element type, at most 4 dimensions, fewer than
//    2^63 elements, an offset that is a multiple of the alignment, and lies
//    wholly inside the data section;
//  - no two tensors share a byte, no two tensors or keys share a name;
//  - general.alignment, if present, is a uint32 power of two <= 1 MiB;
// so readers can index the data section without further checks.
// docs/formats-gguf.md lists every check.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "zaya/io/gguf_format.h"
#include "zaya/io/gguf_value.h"

namespace zaya {

struct GgufTensorInfo {
  std::string name;
  GgmlType type = GgmlType::kF32;
  std::vector<int64_t> dims;   // as stored: ggml order, dims[0] is the innermost (contiguous) axis
  std::vector<int64_t> shape;  // PyTorch order (dims reversed), outermost first; empty for 0 dims
  int64_t numel = 1;
  uint64_t offset = 0;  // bytes from the start of the data section
  uint64_t nbytes = 0;
};

struct GgufLayout {
  uint32_t version = kGgufVersion;
  uint64_t alignment = kGgufDefaultAlignment;
  GgufMetadata metadata;
  std::vector<GgufTensorInfo> tensors;  // in file order
  uint64_t data_offset = 0;             // file offset of the data section (end of the tensor infos, aligned)
  uint64_t data_size = 0;               // bytes from data_offset to the end of the file
};

// Validates `file` (the complete file contents) and returns its layout.
// `label` names the file in error messages (usually its path).
GgufLayout parse_gguf_layout(std::string_view label, std::span<const uint8_t> file);

// Converts `count` elements of a float tensor (F32, F16, BF16 or F64) encoded
// little-endian in `src` (count * element size bytes) to float; Q8_0 and
// MXFP4 tensors too, in whole blocks. Throws zaya::Error naming `label` and
// `name` for any other type, and for an MXFP4 block whose scale byte is 255
// (NaN in the MX spec), naming the block: `first` is the element of the tensor
// that src starts at (ranged reads), for that message.
void gguf_convert_to_f32(std::string_view label, std::string_view name, GgmlType type, std::span<const uint8_t> src,
                         float* dst, uint64_t count, uint64_t first = 0);

// Shapes compare equal when they match after dropping leading 1s: ggml writers
// drop trailing size-1 ggml dims, so [1, F, D] is stored as [F, D].
bool gguf_same_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

}  // namespace zaya
