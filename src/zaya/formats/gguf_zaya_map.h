#pragma once
// The ZAYA <-> GGUF mapping (docs/formats-gguf.md): which GGUF tensor holds
// which elements of which legacy tensor (spec §6.1), and the ZayaConfig as
// GGUF metadata. Files are written and read by gguf_zaya.h; this part needs
// no model, so the fuzz target for GGUF files exercises it too.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "zaya/io/gguf_parse.h"
#include "zaya/io/gguf_writer.h"
#include "zaya/model/config.h"
#include "zaya/model/tensor_table.h"

namespace zaya {

inline constexpr const char* kZayaGgufArchitecture = "zaya";
// Value of zaya.tensor_data_layout: the version of the mapping below.
inline constexpr const char* kZayaGgufLayout = "zaya.cpp-1";

// A run of elements of one legacy tensor: [first, first + count) in its storage order.
struct ZayaGgufSegment {
  std::string legacy_name;
  int64_t first = 0;
  int64_t count = 0;
};

// One GGUF tensor and, in storage order, the legacy elements it holds.
struct ZayaGgufTensor {
  std::string name;            // e.g. blk.3.ffn_gate_exps.weight
  std::vector<int64_t> shape;  // PyTorch order (stored reversed, in ggml order)
  std::vector<ZayaGgufSegment> segments;
  bool keep_f32 = false;  // 1-D tensors (norms, scales, biases, balancing biases) are always F32
  bool int8 = false;      // in the int8 set (zaya_int8_matrix): Q8_0 in a q8_0 export, and allowed as Q8_0 on reading
  // Taps the decoder reads as f32 vectors whatever the dtype (the depthwise
  // conv [C, 1, k0]): F32 in a q8_0 export, so that it holds what `--dtype int8` runs.
  bool decoder_f32 = false;
  bool expert = false;  // a stacked expert tensor (ffn_{gate,up,down}_exps): MXFP4 in an `--experts mxfp4` export
};

// The int8 set, shared by `--dtype int8` (infer/infer_model.h) and the Q8_0
// export so that both give the same bytes: the attention projections (q, k,
// both value projections, o), every expert's fc1 and fc2, and the LM head
// (the embedding when `tied_head`, else lm_head), each only when its rows
// (`cols` elements) are whole Q8_0 blocks of 32 (every ZAYA1 and preset matrix
// is; a toy config's other matrices stay float). The router, convolutions,
// norms, temperatures and residual scales are never in it.
bool zaya_int8_matrix(TensorRole role, int64_t cols, bool tied_head);

// The mapping for `config`: every parameter and buffer of ParamTable(config)
// appears in exactly one segment (checked).
std::vector<ZayaGgufTensor> zaya_gguf_tensor_map(const ZayaConfig& config);

struct GgufSaveOptions {
  // f32, bf16 or f16 (for tensors of 2+ dimensions; 1-D stay F32), or q8_0:
  // the int8 set (zaya_int8_matrix) as Q8_0, the other 2+-D tensors BF16.
  std::string dtype = "f32";
  std::string name = "zaya";  // general.name
  // "mxfp4": the stacked expert tensors as ggml's MXFP4 (core/mxfp4.h; llama.cpp's type 39, as gpt-oss GGUFs hold
  // their experts), the other tensors as `dtype` says; empty: none.
  std::string experts;
  uint32_t alignment = kGgufDefaultAlignment;
  // Written after the config's keys, e.g. the tokenizer's (data/tokenizer_gguf.h).
  std::vector<GgufKeyValue> extra_metadata;
};

// The ggml type of options.dtype (throws for anything but f32, bf16, f16, q8_0).
GgmlType zaya_gguf_dtype(const std::string& dtype);
// The type tensor `t` is written as under `dtype` (keep_f32 tensors: F32), an expert tensor under
// experts_mxfp4 as MXFP4.
GgmlType zaya_gguf_tensor_type(const ZayaGgufTensor& t, GgmlType dtype, bool experts_mxfp4 = false);

// All metadata of a ZAYA GGUF file: general.* (architecture, name, file
// type), the config as zaya.* keys, the tokenizer's special ids, then
// options.extra_metadata.
void write_zaya_gguf_metadata(const ZayaConfig& config, const GgufSaveOptions& options, GgufWriter& writer);
// Checks general.architecture and zaya.tensor_data_layout (a file of another
// tool or architecture is refused saying what zaya reads), rebuilds the config
// and validates it; errors name metadata.label() and the key.
ZayaConfig zaya_config_from_gguf(const GgufMetadata& metadata);

// Checks that `tensors` (a GGUF file's, `label` naming it) are exactly those
// of `map`, each with the mapped shape and a float type (F32, F16, BF16, F64),
// or Q8_0 for the tensors of the int8 set.
void check_zaya_gguf_tensors(std::string_view label, const std::vector<ZayaGgufTensor>& map,
                             const std::vector<GgufTensorInfo>& tensors);

}  // namespace zaya
