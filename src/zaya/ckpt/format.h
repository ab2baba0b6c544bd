#pragma once
// The checkpoint format (docs/checkpoints.md). A checkpoint is one directory
// per step:
//
//   CKPT_ROOT/step_00000100/
//     metadata.json                  every tensor as a global tensor + the training state
//     shard-00000-of-00004.bin       what rank 0 owned, raw little-endian bytes
//     ...
//
// Each tensor is described by name, dtype, global shape and the slices that
// hold it: (file, byte offset, byte length, first element, element count,
// XXH3-64 checksum). Ranks write the tensors they own (their ZeRO-1 shard; a
// replicated tensor is written once), so a checkpoint is independent of the
// layout that wrote it and loads into any other.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace zaya {

inline constexpr const char* kCheckpointFormat = "zaya-checkpoint";
inline constexpr int kCheckpointVersion = 1;
inline constexpr const char* kCheckpointMetadata = "metadata.json";

enum class CkptDType { kF32, kF64 };
size_t ckpt_dtype_bytes(CkptDType t);
const char* ckpt_dtype_name(CkptDType t);

struct CkptSlice {
  int32_t file = 0;     // index into CheckpointMeta::files
  uint64_t offset = 0;  // byte offset in that file
  uint64_t bytes = 0;
  int64_t start = 0;  // first element (flat, row-major) of the global tensor
  int64_t count = 0;  // elements
  uint64_t xxh3 = 0;  // XXH3-64 of the slice's bytes
};

struct CkptTensor {
  std::string name;
  CkptDType dtype = CkptDType::kF32;
  std::vector<int64_t> shape;
  std::vector<CkptSlice> slices;
  int64_t numel() const;
};

struct CkptFile {
  std::string name;  // relative to the checkpoint directory
  uint64_t bytes = 0;
};

struct CheckpointMeta {
  std::string run_id;
  int64_t step = 0;
  int world = 1, dp = 1, ep = 1;  // the layout that wrote it (world = dp x ep x cp)
  int cp = 1;                     // context-parallel ranks (absent in older checkpoints: 1)
  std::vector<CkptFile> files;
  std::map<std::string, CkptTensor> tensors;
  nlohmann::json state;     // trainer state: sampler, optimizer/controller steps, loss windows
  std::string config_toml;  // the resolved training config
  // The model on its own, so that readers need no training config: its
  // config.json in the legacy keys (formats/hf_config.h), and the tokenizer the
  // data was built with (empty: none). Absent in checkpoints written before
  // they existed (ckpt/checkpoint_model.h falls back to config_toml).
  nlohmann::json model_config;
  std::string tokenizer;

  nlohmann::json to_json() const;
  // Validates structure and consistency (slices inside their files, covering
  // each tensor exactly, no overlaps); errors name `source` and the field.
  static CheckpointMeta from_json(const nlohmann::json& j, const std::string& source);
};

// step_00000100
std::string checkpoint_dir_name(int64_t step);

}  // namespace zaya
