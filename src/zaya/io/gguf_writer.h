#pragma once
// Writer for GGUF v3 files (format: gguf_format.h, docs/formats-gguf.md).
//
//   GgufWriter w;                                   // alignment 32
//   w.set_string("general.architecture", "zaya");
//   w.set_u32("zaya.block_count", 40);
//   w.add_f32("token_embd.weight", {vocab, dim}, emb_VD, GgmlType::kBF16);
//   w.write("out/model.gguf");
//
// Layout choices:
//  - metadata in insertion order, then general.alignment (always written, as
//    a uint32, so readers never rely on the default);
//  - shapes are given in PyTorch order (outermost first) and stored reversed,
//    in ggml order, as llama.cpp's converters do; all given dims are written
//    (ggml drops trailing size-1 dims; readers compare shapes modulo those);
//  - tensor data in insertion order, each tensor at the next multiple of the
//    alignment and zero-padded to one, the last one included: the layout
//    ggml's own reader insists on;
//  - the file is streamed to `path.tmp` (tensor data is converted through a
//    small buffer, never gathered), fsynced and renamed over `path`.
//
// The writer borrows the source pointers: they must stay valid and unchanged
// until write() returns.

#include <cstdint>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "zaya/io/gguf_format.h"
#include "zaya/io/gguf_value.h"

namespace zaya {

class GgufWriter {
 public:
  struct Tensor {
    std::string name;
    std::vector<int64_t> shape;  // PyTorch order
    GgmlType type = GgmlType::kF32;
    int64_t numel = 0;
    uint64_t nbytes = 0;
    uint64_t offset = 0;                         // within the data section
    std::vector<std::span<const float>> pieces;  // float sources, concatenated (borrowed)
    const void* raw = nullptr;                   // or: already-encoded bytes (borrowed)
  };

  // `alignment`: a power of two, a multiple of 8 (the spec's rule), at most 1 MiB.
  explicit GgufWriter(uint32_t alignment = kGgufDefaultAlignment);

  // Adds a metadata pair. Keys are hierarchical lower_snake_case ("zaya.block_count"),
  // unique, at most 65535 bytes; general.alignment is the writer's own.
  void set(std::string key, GgufValue value);
  void set_string(std::string key, std::string v) { set(std::move(key), GgufValue::string(std::move(v))); }
  void set_u32(std::string key, uint32_t v) { set(std::move(key), GgufValue::u32(v)); }
  void set_u64(std::string key, uint64_t v) { set(std::move(key), GgufValue::u64(v)); }
  void set_i32(std::string key, int32_t v) { set(std::move(key), GgufValue::i32(v)); }
  void set_i64(std::string key, int64_t v) { set(std::move(key), GgufValue::i64(v)); }
  void set_f32(std::string key, float v) { set(std::move(key), GgufValue::f32(v)); }
  void set_f64(std::string key, double v) { set(std::move(key), GgufValue::f64(v)); }
  void set_bool(std::string key, bool v) { set(std::move(key), GgufValue::boolean(v)); }

  // numel floats stored as `type` (F32, F16, BF16 or F64; F16/BF16 round to
  // nearest even; or Q8_0, quantized as core/q8_0.h, rows a multiple of 32).
  void add_f32(std::string name, std::vector<int64_t> shape, const float* src, GgmlType type = GgmlType::kF32);
  // A tensor whose elements, in storage order, are the concatenation of
  // `pieces` (e.g. the gate halves of every expert's fc1, stacked).
  void add_f32_pieces(std::string name, std::vector<int64_t> shape, std::vector<std::span<const float>> pieces,
                      GgmlType type = GgmlType::kF32);
  // numel elements already in `type`'s little-endian encoding, copied verbatim.
  void add_raw(std::string name, std::vector<int64_t> shape, GgmlType type, const void* data);

  const GgufMetadata& metadata() const { return metadata_; }
  const std::vector<Tensor>& tensors() const { return tensors_; }
  uint32_t alignment() const { return alignment_; }
  // Size of the file write() produces.
  uint64_t file_size() const;

  // Writes the file atomically. Throws zaya::Error on I/O failure.
  void write(const std::string& path) const;

 private:
  Tensor& add(std::string name, std::vector<int64_t> shape, GgmlType type);
  // Header, metadata, tensor infos and the padding before the data section.
  std::string encode_head() const;

  uint32_t alignment_;
  GgufMetadata metadata_{"gguf writer"};
  std::vector<Tensor> tensors_;
  std::unordered_set<std::string> names_;
  uint64_t data_bytes_ = 0;  // data section size so far, padded
};

}  // namespace zaya
