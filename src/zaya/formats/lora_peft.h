#pragma once
// LoRA adapters in the PEFT layout (docs/formats.md "LoRA adapters"), so
// PEFT users load them with PeftModel.from_pretrained(base, DIR). A file
// format beside the HF and GGUF ones; the adapters themselves, and the
// nn.Linear targets' tensor names (peft_lora_a_name, also their checkpoint
// names), are model/lora.h's:
//
//   DIR/adapter_config.json        peft_type "LORA", r, lora_alpha, lora_dropout,
//                                  target_modules (attention and router modules),
//                                  target_parameters (the expert parameters, when targeted), ...
//   DIR/adapter_model.safetensors  F32, under the native layout's module paths
//                                  (model/lora.h lora_module_path):
//
// nn.Linear targets (lora.Linear):
//   base_model.model.<module path>.lora_A.weight  [r, in]   = A
//   base_model.model.<module path>.lora_B.weight  [out, r]  = B
//
// Expert targets (PEFT's ParamWrapper on the stacked parameter W [E, d1, d2]
// of module model.layers.N.mlp.experts; d1 = out, d2 = in of one expert's
// y = x W_e^T): one pair for all experts, as PEFT 0.21 lays it out (ZayaExperts
// is not `is_transposed`, so PEFT takes the parameter's own [E, out, in] order):
//   lora_A.weight [r E, d2]: row e r + k     = A_e[k, :]   (PEFT views it as [E, r, d2])
//   lora_B.weight [d1, r E]: column k E + e  = B_e[:, k]   (PEFT views it as [d1, r, E])
// so PEFT's delta einsum("o r e, e r i -> e o i", lora_B, lora_A) * alpha / r
// is exactly (alpha / r) B_e A_e for every expert: the same W_e + delta_e as
// merge_lora and the unmerged branch. PEFT wraps a second parameter of the
// same module by nesting its ParamWrapper around the first: with both expert
// targets, gate_up_proj's pair is under mlp.experts.base_layer.lora_{A,B}
// and down_proj's under mlp.experts.lora_{A,B} (the experts module registers
// gate_up_proj first); with one, it is under mlp.experts.lora_{A,B}.

#include <memory>
#include <string>

#include "zaya/model/config.h"
#include "zaya/model/lora.h"

namespace zaya {

// PEFT's tensor names for any target of an adapter of these `targets` (the
// expert targets' depend on which of them are targeted).
std::string peft_tensor_name(const ZayaConfig& config, const LoraConfig& lora, int64_t block, LoraTarget target,
                             bool lora_b);

// Writes both files into `dir` (created when missing), each atomically.
// base_model: what adapter_config.json records as base_model_name_or_path.
void write_peft_adapter(const std::string& dir, const LoraAdapters& adapters, const std::string& base_model);

// The LoRA settings of DIR/adapter_config.json; throws naming the file, the
// key and what is allowed for anything zaya cannot apply exactly. Names in
// target_modules / target_parameters are matched as PEFT matches them: a
// name selects every targetable module (parameter) whose path below
// model.layers.N. is the name or ends with "." + name (q_proj,
// router_mlp.fc1, down_proj in target_modules = the router's, gate_up_proj in
// target_parameters, ...); each must select at least one.
LoraConfig read_peft_adapter_config(const std::string& dir);

// Reads an adapter for a model of `config`: every expected tensor must be
// present with its shape, and no other tensor may be (errors name the file,
// the tensor and the expected shape). Of two nested expert pairs the one
// whose shapes fit is taken, should the module register down_proj first.
std::unique_ptr<LoraAdapters> read_peft_adapter(const std::string& dir, const ZayaConfig& config);

}  // namespace zaya
