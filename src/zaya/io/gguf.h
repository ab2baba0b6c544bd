#pragma once
// GGUF files (ggml-org/ggml docs/gguf.md, version 3): a memory-mapped,
// validated reader. The writer is in gguf_writer.h; the ZAYA tensor mapping in
// formats/gguf_zaya.h; docs/formats-gguf.md describes both.
//
//   GgufFile f = GgufFile::open("model.gguf");
//   std::string arch = f.metadata().get_string("general.architecture");
//   f.read_f32("token_embd.weight", emb_VD, {vocab, dim});   // F32/F16/BF16/F64 -> float
//
// open() validates the whole layout first (gguf_parse.h); after that every
// accessor works on byte ranges proven to lie inside the file. Tensor data is
// little-endian and aligned to general.alignment within the file; the readers
// copy (and convert) into caller memory. The object is immutable after open(),
// so its const methods may be called from several threads at once.

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "zaya/io/gguf_format.h"
#include "zaya/io/gguf_parse.h"
#include "zaya/io/gguf_value.h"
#include "zaya/io/mapped_file.h"

namespace zaya {

class GgufFile {
 public:
  // Maps and validates `path`; throws zaya::Error naming the file, the key or
  // tensor and the field for any malformed content.
  static GgufFile open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  uint32_t version() const { return layout_.version; }
  uint64_t alignment() const { return layout_.alignment; }
  // File offset of the tensor data section.
  uint64_t data_offset() const { return layout_.data_offset; }

  const GgufMetadata& metadata() const { return layout_.metadata; }

  // Tensor infos in file order.
  const std::vector<GgufTensorInfo>& tensors() const { return layout_.tensors; }
  bool has_tensor(const std::string& name) const { return index_.count(name) != 0; }
  // Throws zaya::Error if there is no tensor called `name`.
  const GgufTensorInfo& tensor(const std::string& name) const;

  // The tensor's raw little-endian bytes inside the mapping.
  std::span<const uint8_t> bytes(const std::string& name) const;

  // Copies the whole tensor into dst (numel floats), converting F32, F16, BF16,
  // F64 or Q8_0. `expected_shape` is in PyTorch order (outermost first) and must
  // match the tensor's shape (leading 1s aside: gguf_same_shape).
  void read_f32(const std::string& name, float* dst, const std::vector<int64_t>& expected_shape) const;

  // Copies elements [first, first + count) of the tensor, in storage order
  // (row-major over the PyTorch shape), into dst, converting as read_f32 does
  // (Q8_0 too: dequantized).
  void read_f32_range(const std::string& name, uint64_t first, uint64_t count, float* dst) const;

  // The raw bytes of elements [first, first + count); for a block type (Q8_0)
  // both ends must be on block boundaries.
  std::span<const uint8_t> range_bytes(const std::string& name, uint64_t first, uint64_t count) const;

 private:
  GgufFile(MappedFile file, GgufLayout layout);

  MappedFile file_;
  GgufLayout layout_;
  std::unordered_map<std::string, size_t> index_;  // name -> position in layout_.tensors
};

}  // namespace zaya
