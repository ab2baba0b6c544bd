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

#include "zaya/core/enum_names.h"
#include "zaya/formats/hf_checkpoint.h"
#include "zaya/model/model.h"

namespace zaya {

// DIR/config.json in either layout; `native`, when given, says which.
ZayaConfig read_model_directory_config(const std::string& dir, bool* native = nullptr);

// A model directory in either layout, which config.json tells, loaded as a
// whole model (load_model_directory_weights: every tensor present with its
// shape, nothing else). The model computes with legacy semantics, which differ
// from the native ones only where the skip expert is chosen (spec §8.1).
// expert_type: the routed experts held as packed rows of that type (a
// quantized LoRA base, model/model.h): a checkpoint's own packed experts of
// that type as stored, any other quantized at load.
std::unique_ptr<ZayaModel> load_model_directory(const std::string& dir, bool* native = nullptr,
                                                WeightType expert_type = WeightType::kF32);

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

// The two layouts a model directory is written in (`zaya ckpt export --layout`, `train.save_layout`).
enum class DirectoryLayout { kLegacy, kNative };
inline constexpr EnumName<DirectoryLayout> kDirectoryLayoutNames[] = {{DirectoryLayout::kLegacy, "legacy"},
                                                                      {DirectoryLayout::kNative, "native"}};
// "legacy" or "native"; anything else is refused naming `what` (a flag or key) and the allowed values.
DirectoryLayout parse_directory_layout(const std::string& name, const std::string& what);
const char* directory_layout_name(DirectoryLayout layout);

// The half-layers where the skip slot can be chosen: per MoE layer the skip
// slot's biased probability is at most 1 + b_skip and a real expert's at
// least its bias, so the slot is dead when 1 + b_skip is below the top_k-th
// largest expert bias (spec §4, §8.1). `buffers` / `buffer_data`: the
// balancing biases.
std::vector<int> live_skip_half_layers(const ZayaConfig& config, const ParamTable& buffers, const float* buffer_data);

// Why weights computed with the legacy semantics (every model zaya.cpp loads
// or trains) cannot be written in the native layout with the same outputs,
// or empty: the config has no native spelling (native_layout_problem), or
// the skip slot can be chosen somewhere, where native outputs 0 and legacy
// p_skip * x. `source` names the model in the message.
std::string native_export_problem(const ZayaConfig& config, const ParamTable& buffers, const float* buffer_data,
                                  const std::string& source);

// Writes `tensors` (complete_model_tensors) in `layout`: save_hf_tensors or save_native_tensors.
void save_model_directory(const ZayaConfig& config, const std::vector<NamedTensor>& tensors, const std::string& dir,
                          DirectoryLayout layout, const HfSaveOptions& options = {});

}  // namespace zaya
