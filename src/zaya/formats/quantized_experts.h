#pragma once
// The quantized routed experts of a model directory (docs/formats.md,
// "Quantized experts"): config.json's `quantization_config` and the tensors it
// implies, read into the packed rows of ops/matvec_lowbit.h. Read:
//
//  * compressed-tensors `mxfp4-pack-quantized` (quant_method
//    "compressed-tensors", weights num_bits 4, type float, group_size 32):
//    `P.weight_packed` U8 [.., rows, cols / 2] (the even element in the low
//    nibble) and `P.weight_scale` U8 [.., rows, cols / 32] (E8M0);
//  * compressed-tensors `float-quantized` (num_bits 8, type float, strategy
//    channel): `P.weight` (or `P`) F8_E4M3 [.., rows, cols] and
//    `P.weight_scale` [.., rows, 1] (F32, BF16 or F16);
//  * Hugging Face fine-grained FP8 (quant_method "fp8", weight_block_size
//    [b, 128]): `P` (or `P.weight`) F8_E4M3 and `P.weight_scale_inv`
//    [.., ceil(rows / b), ceil(cols / 128)], a multiplier despite its name.
//
// P is a native stacked expert tensor (model.layers.N.mlp.experts.gate_up_proj,
// [E, 2F, D], gate rows then up rows; ...down_proj, [E, D, F]), so the stacked
// tensors have a leading E; `P_packed` / `P_scale` / `P_scale_inv` are
// accepted for the suffixed names, and per-expert 2-D tensors
// (...experts.{e}.gate_up_proj.weight_packed, or ...experts.{e}.gate_proj and
// ...experts.{e}.up_proj, stacked gate then up). Only the routed experts may be
// quantized (everything else stays float, as the released checkpoints keep
// it). Any other format, a missing or misshapen tensor, a scale byte 255 (NaN
// in the MX spec), an FP8 NaN code or a non-finite FP8 scale is a load error
// naming the tensor and what was expected: nothing is ever read as zero.

#include <cstdint>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "zaya/io/safetensors_dir.h"
#include "zaya/ops/matvec.h"

namespace zaya {

enum class ExpertQuantFormat { kNone, kMxfp4, kFp8Channel, kFp8Block };

struct ExpertQuant {
  ExpertQuantFormat format = ExpertQuantFormat::kNone;
  int64_t block_rows = 0;  // kFp8Block: weight_block_size[0]

  bool quantized() const { return format != ExpertQuantFormat::kNone; }
  // kMXFP4 or kFP8 (kNone: kF32, unused).
  WeightType weight_type() const;
  // "mxfp4 (compressed-tensors mxfp4-pack-quantized)", ...; "none".
  std::string description() const;
};

// config.json's quantization_config (absent: kNone). Errors name `source` and say what is supported.
ExpertQuant parse_expert_quant(const nlohmann::json& config, const std::string& source);

// Expert `expert` of the stacked native tensor `base` ([experts, rows, cols] when float) as `rows` packed rows of
// weight_row_bytes(q.weight_type(), cols) bytes at dst. The names read are added to `used`.
void read_quantized_expert(const SafetensorsDir& st, const ExpertQuant& q, const std::string& base, int64_t experts,
                           int64_t expert, int64_t rows, int64_t cols, uint8_t* dst, std::set<std::string>& used);

// The quantization_config `zaya ckpt export --experts mxfp4` writes: compressed-tensors' own spelling of its
// MXFP4A16 scheme (weights num_bits 4, float, group 32, uint8 scales) on every module whose name has "experts".
nlohmann::json mxfp4_quantization_config();
// The one `--experts fp8` writes: compressed-tensors' float-quantized channel FP8 weights (FP8_DYNAMIC's weights,
// weight-only: no input_activations) on the same modules.
nlohmann::json fp8_quantization_config();

// Bytes of one expert's [rows, cols] matrix held as `q` says (bf16 when not quantized).
int64_t quantized_matrix_bytes(const ExpertQuant& q, int64_t rows, int64_t cols);

}  // namespace zaya
