#pragma once
// Reader for one Hugging Face safetensors file. The file is memory-mapped
// read-only and its header validated once at open() (safetensors_header.h);
// after that, every accessor works on ranges proven to lie inside the file.
//
//   auto st = SafetensorsFile::open("model.safetensors");
//   st.read_f32("model.norm.weight", w_D, {dim});   // any float dtype -> float
//
// Tensor data in the file is little-endian and not necessarily aligned; the
// readers copy (and convert) into caller memory, so callers never see an
// unaligned pointer unless they ask for bytes(). The object is immutable after
// open(), so its const methods may be called from several threads at once.

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "zaya/io/mapped_file.h"
#include "zaya/io/safetensors_header.h"

namespace zaya {

class SafetensorsFile {
 public:
  // Maps and validates `path`; throws zaya::Error naming the file, tensor and
  // field for any malformed header.
  static SafetensorsFile open(const std::string& path);

  const std::string& path() const { return file_.path(); }

  // Tensor names in header order.
  std::vector<std::string> names() const;
  // Per-tensor information in header order.
  const std::vector<SafetensorsTensorInfo>& tensors() const { return layout_.tensors; }

  bool has(const std::string& name) const { return index_.count(name) != 0; }
  // Throws zaya::Error if there is no tensor called `name`.
  const SafetensorsTensorInfo& info(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return layout_.metadata; }

  // The tensor's raw little-endian bytes inside the mapping (no alignment guarantee).
  std::span<const uint8_t> bytes(const std::string& name) const;
  // The whole data buffer (all tensors, plus any gaps between them).
  std::span<const uint8_t> data_buffer() const;

  // Copies the tensor into dst (numel floats), converting F32, BF16, F16 or
  // F64. Throws if the dtype is not one of those or the shape differs from
  // expected_shape (the message names both).
  void read_f32(const std::string& name, float* dst, const std::vector<int64_t>& expected_shape) const;

  // Copies an integer tensor (I8, U8, I16, U16, I32, U32, I64, U64) into dst
  // (numel int32s). Throws if the dtype is not an integer type, the shape
  // differs, or an element does not fit in int32 (naming the element).
  void read_i32(const std::string& name, int32_t* dst, const std::vector<int64_t>& expected_shape) const;

 private:
  SafetensorsFile(MappedFile file, SafetensorsLayout layout);
  void check_shape(const SafetensorsTensorInfo& info, const std::vector<int64_t>& expected_shape) const;

  MappedFile file_;
  SafetensorsLayout layout_;
  std::unordered_map<std::string, size_t> index_;  // name -> position in layout_.tensors
};

}  // namespace zaya
