#pragma once
// LoRA adapters in the PEFT layout (docs/formats.md "LoRA adapters"), so
// PEFT users load them with PeftModel.from_pretrained(base, DIR):
//
//   DIR/adapter_config.json        peft_type "LORA", r, lora_alpha, lora_dropout,
//                                  target_modules (the native layout's module leaves), ...
//   DIR/adapter_model.safetensors  base_model.model.<module path>.lora_A.weight [r, in]
//                                  base_model.model.<module path>.lora_B.weight [out, r]
//
// Module paths are the native layout's (model/lora.h lora_module_path), F32.

#include <memory>
#include <string>

#include "zaya/model/config.h"
#include "zaya/model/lora.h"

namespace zaya {

// PEFT's tensor names of one adapter's A and B.
std::string peft_lora_a_name(const ZayaConfig& config, int64_t block, LoraTarget target);
std::string peft_lora_b_name(const ZayaConfig& config, int64_t block, LoraTarget target);

// Writes both files into `dir` (created when missing), each atomically.
// base_model: what adapter_config.json records as base_model_name_or_path.
void write_peft_adapter(const std::string& dir, const LoraAdapters& adapters, const std::string& base_model);

// The LoRA settings of DIR/adapter_config.json; throws naming the file, the
// key and what is allowed for anything zaya cannot apply exactly.
LoraConfig read_peft_adapter_config(const std::string& dir);

// Reads an adapter for a model of `config`: every expected tensor must be
// present with its shape, and no other tensor may be (errors name the file,
// the tensor and the expected shape).
std::unique_ptr<LoraAdapters> read_peft_adapter(const std::string& dir, const ZayaConfig& config);

}  // namespace zaya
