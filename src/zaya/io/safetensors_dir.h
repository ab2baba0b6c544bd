#pragma once
// Hugging Face model directories: either one `model.safetensors`, or shards
// `model-00001-of-0000N.safetensors` plus `model.safetensors.index.json`:
//
//   {"metadata": {"total_size": <sum of tensor bytes>},
//    "weight_map": {"<tensor name>": "<shard file name>", ...}}
//
// SafetensorsDir opens either form and presents one name -> tensor view, so
// loaders never care how a checkpoint was split. The index and the shards must
// agree exactly: every tensor the index lists is in its shard, every tensor of
// every shard is listed, and no tensor is in two shards.

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "zaya/io/safetensors_file.h"
#include "zaya/io/safetensors_writer.h"

namespace zaya {

inline constexpr const char* kSafetensorsSingleFile = "model.safetensors";
inline constexpr const char* kSafetensorsIndexFile = "model.safetensors.index.json";

class SafetensorsDir {
 public:
  // Opens `path`: a directory holding an index (preferred when present) or a
  // single model.safetensors, or a path to one .safetensors file.
  static SafetensorsDir open(const std::string& path);

  // Tensor names: index order for a sharded directory, header order otherwise.
  const std::vector<std::string>& names() const { return names_; }
  bool has(const std::string& name) const { return shard_of_.count(name) != 0; }

  // The shard holding `name` (throws zaya::Error if there is none).
  const SafetensorsFile& file_of(const std::string& name) const;
  const SafetensorsTensorInfo& info(const std::string& name) const { return file_of(name).info(name); }
  std::span<const uint8_t> bytes(const std::string& name) const { return file_of(name).bytes(name); }

  void read_f32(const std::string& name, float* dst, const std::vector<int64_t>& expected_shape) const {
    file_of(name).read_f32(name, dst, expected_shape);
  }
  void read_i32(const std::string& name, int32_t* dst, const std::vector<int64_t>& expected_shape) const {
    file_of(name).read_i32(name, dst, expected_shape);
  }

  // The opened files (one for a single-file checkpoint).
  const std::vector<SafetensorsFile>& shards() const { return shards_; }

 private:
  SafetensorsDir() = default;
  static SafetensorsDir open_index(const std::string& dir);

  std::string path_;
  std::vector<SafetensorsFile> shards_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, size_t> shard_of_;  // tensor name -> index into shards_
};

// Writes `tensors` into directory `dir` (created if missing) in the Hugging
// Face layout: a single model.safetensors when all tensor data fits in
// max_shard_bytes, otherwise model-0000i-of-0000N.safetensors shards of at
// most max_shard_bytes of tensor data each (a larger tensor gets a shard of its
// own) plus model.safetensors.index.json, written last. Every file is written
// atomically; a stale index left by an earlier sharded save is removed when a
// single file is written, so SafetensorsDir::open cannot pick it up.
void write_sharded(const std::string& dir, const SafetensorsWriter& tensors, uint64_t max_shard_bytes);

}  // namespace zaya
