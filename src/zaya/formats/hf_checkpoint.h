#pragma once
// Weights as a Hugging Face-style directory: config.json (legacy keys,
// hf_config.h) + model.safetensors (or shards + model.safetensors.index.json)
// with the legacy tensor names of spec §6.1, so the same files load in the
// reference implementation and other tools.

#include <cstdint>
#include <memory>
#include <string>

#include "zaya/model/model.h"

namespace zaya {

struct HfSaveOptions {
  std::string dtype = "f32";  // f32 or bf16 (balancing biases always F32)
  uint64_t max_shard_bytes = uint64_t(5) << 30;
  // "mxfp4" / "fp8": the native layout's routed experts in compressed-tensors' mxfp4-pack-quantized or
  // float-quantized (channel FP8 E4M3) layout (formats/quantized_experts.h, `zaya ckpt export --experts`); empty:
  // as dtype says.
  std::string experts;
};

// Creates `dir` if needed; every file is written atomically.
void save_hf_model(const ZayaModel& model, const std::string& dir, const HfSaveOptions& options = {});

// One tensor to write: its legacy name, shape and float32 values.
struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;
  bool always_f32 = false;  // buffers (balancing biases) stay F32 whatever the dtype
};

// Every parameter, then every buffer, of a model that holds all its experts
// (a rank of an expert-parallel run holds only some: an error naming them).
std::vector<NamedTensor> complete_model_tensors(const ZayaModel& model);

// The general form: any list of tensors (e.g. gathered from expert-parallel ranks).
void save_hf_tensors(const ZayaConfig& config, const std::vector<NamedTensor>& tensors, const std::string& dir,
                     const HfSaveOptions& options = {});

// Reads config.json and the weights. Every parameter and buffer must be present
// with its exact shape (F32, BF16, F16 or F64 on disk); a tied `lm_head.weight`
// is accepted and ignored; any other unexpected tensor is an error.
std::unique_ptr<ZayaModel> load_hf_model(const std::string& dir);

// Loads the weights of `dir` into an existing model with the same config.
void load_hf_weights(ZayaModel& model, const std::string& dir);

}  // namespace zaya
