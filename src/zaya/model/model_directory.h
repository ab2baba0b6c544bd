#pragma once
// A model directory in either Hugging Face layout (config.json + safetensors):
// the legacy one of ZAYA1-base (hf_config.h, hf_checkpoint.h) or the native
// 40-layer one of ZAYA1-8B and later (native_config.h: renamed tensors,
// experts stacked per layer). Both are read and written through the tensor
// table, so a round trip legacy -> native -> legacy keeps every bit.
// `model.init_from` (docs/training.md) starts a training run from one.

#include <memory>
#include <string>
#include <vector>

#include "zaya/model/hf_checkpoint.h"
#include "zaya/model/model.h"

namespace zaya {

// DIR/config.json in either layout; `native`, when given, says which.
ZayaConfig read_model_directory_config(const std::string& dir, bool* native = nullptr);

// A model directory in either layout, which config.json tells, loaded as a
// whole model (load_model_directory_weights: every tensor present with its
// shape, nothing else). The model computes with legacy semantics, which differ
// from the native ones only where the skip expert is chosen (spec §8.1).
std::unique_ptr<ZayaModel> load_model_directory(const std::string& dir, bool* native = nullptr);

// Loads the weights of `dir` (either layout) into `model`, whose config must
// be the directory's and which may hold only some experts (expert
// parallelism): its own tensors must all be there with their shapes (F32,
// BF16, F16 or F64 on disk), and the directory may hold nothing that is not
// part of the model (a tied lm_head.weight is accepted and ignored).
void load_model_directory_weights(ZayaModel& model, const std::string& dir);
// The same into any parameter and buffer tables of `config` and their arenas.
void load_model_directory_tensors(const std::string& dir, const ZayaConfig& config, const ParamTable& params,
                                  float* param_data, const ParamTable& buffers, float* buffer_data);

// Writes `tensors` (legacy names, every expert: complete_model_tensors) as a
// native directory: config.json (config_to_native_json) and the renamed
// tensors, experts stacked into one [E, ...] tensor per layer and role.
void save_native_tensors(const ZayaConfig& config, const std::vector<NamedTensor>& tensors, const std::string& dir,
                         const HfSaveOptions& options = {});

}  // namespace zaya
