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
};

// The mapping for `config`: every parameter and buffer of ParamTable(config)
// appears in exactly one segment (checked).
std::vector<ZayaGgufTensor> zaya_gguf_tensor_map(const ZayaConfig& config);

struct GgufSaveOptions {
  std::string dtype = "f32";  // f32, bf16 or f16 (for tensors of 2+ dimensions; 1-D stay F32)
  std::string name = "zaya";  // general.name
  uint32_t alignment = kGgufDefaultAlignment;
  // Written after the config's keys, e.g. the tokenizer's (data/tokenizer_gguf.h).
  std::vector<GgufKeyValue> extra_metadata;
};

// The ggml type of options.dtype (throws for anything but f32, bf16, f16).
GgmlType zaya_gguf_dtype(const std::string& dtype);

// All metadata of a ZAYA GGUF file: general.* (architecture, name, file
// type), the config as zaya.* keys, the tokenizer's special ids, then
// options.extra_metadata.
void write_zaya_gguf_metadata(const ZayaConfig& config, const GgufSaveOptions& options, GgufWriter& writer);
// Checks general.architecture and zaya.tensor_data_layout (a file of another
// tool or architecture is refused saying what zaya reads), rebuilds the config
// and validates it; errors name metadata.label() and the key.
ZayaConfig zaya_config_from_gguf(const GgufMetadata& metadata);

// Checks that `tensors` (a GGUF file's, `label` naming it) are exactly those
// of `map`, each with the mapped shape and a float type (F32, F16, BF16, F64).
void check_zaya_gguf_tensors(std::string_view label, const std::vector<ZayaGgufTensor>& map,
                             const std::vector<GgufTensorInfo>& tensors);

}  // namespace zaya
