#pragma once
// Writer for Hugging Face safetensors files.
//
//   SafetensorsWriter w;
//   w.set_metadata("format", "pt");
//   w.add_bf16("model.embed_tokens.weight", {vocab, dim}, emb_VD);
//   w.write("out/model.safetensors");
//
// Layout choices (docs/formats-safetensors.md):
//  - header keys: "__metadata__" first (if any), then tensors in insertion
//    order, which is therefore the order SafetensorsFile::names() reports;
//  - the header is padded with spaces so the data buffer starts at a multiple
//    of 8 bytes, as the reference writer does;
//  - in the data buffer tensors are packed without gaps, widest dtype first
//    (insertion order within a width), so every tensor starts at a multiple of
//    its element size and memory-mapping readers get aligned data;
//  - the file is written to `path.tmp`, fsynced and renamed over `path`.
//
// The writer borrows the source pointers: they must stay valid and unchanged
// until write() returns. Tensor data is streamed to the file (BF16 through a
// small conversion buffer), never gathered in one big buffer.

#include <cstdint>
#include <map>
#include <string>
#include <unordered_set>
#include <vector>

#include "zaya/io/safetensors_dtype.h"

namespace zaya {

class SafetensorsWriter {
 public:
  struct Tensor {
    std::string name;
    SafetensorsDtype dtype = SafetensorsDtype::kF32;
    std::vector<int64_t> shape;
    uint64_t nbytes = 0;        // bytes in the file
    const void* src = nullptr;  // borrowed
    bool from_float = false;    // src holds floats to round to `dtype` (BF16)
  };

  // numel floats stored as F32.
  void add_f32(std::string name, std::vector<int64_t> shape, const float* src);
  // numel floats stored as BF16, rounded to nearest even.
  void add_bf16(std::string name, std::vector<int64_t> shape, const float* src);
  // numel int32s stored as I32.
  void add_i32(std::string name, std::vector<int64_t> shape, const int32_t* src);
  // numel elements already in `dtype`'s little-endian encoding, copied
  // verbatim (e.g. a tensor passed through from SafetensorsFile::bytes()).
  void add_raw(std::string name, SafetensorsDtype dtype, std::vector<int64_t> shape, const void* src);

  void set_metadata(std::string key, std::string value);
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // Tensors in insertion order.
  const std::vector<Tensor>& tensors() const { return tensors_; }
  // Sum of all tensors' byte sizes (what Hugging Face calls total_size).
  uint64_t data_bytes() const { return data_bytes_; }

  // Writes the file atomically. Throws zaya::Error on I/O failure or if a
  // name or metadata string is not valid UTF-8.
  void write(const std::string& path) const;

  // Splits the tensors, in insertion order, into consecutive groups of at most
  // max_shard_bytes of tensor data each (a tensor larger than that gets a
  // group of its own), each with this writer's metadata. Used by write_sharded.
  std::vector<SafetensorsWriter> split(uint64_t max_shard_bytes) const;
  // The grouping split() makes, on byte sizes alone: for tensors of nbytes[i]
  // bytes in this order, the index of the first tensor of each shard.
  static std::vector<size_t> shard_starts(const std::vector<uint64_t>& nbytes, uint64_t max_shard_bytes);

 private:
  void add(std::string name, SafetensorsDtype dtype, std::vector<int64_t> shape, const void* src, bool from_float);

  std::vector<Tensor> tensors_;
  std::unordered_set<std::string> names_;
  std::map<std::string, std::string> metadata_;
  uint64_t data_bytes_ = 0;
};

}  // namespace zaya
