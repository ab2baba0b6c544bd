#pragma once
// A ZAYA model as one GGUF file (`zaya ckpt export --format gguf`): the
// ZayaConfig as `zaya.*` metadata with the standard llama.cpp keys where one
// exists, and the weights under llama.cpp-style names (blk.N.attn_q.weight,
// ...), the experts of each MoE layer stacked into 3-D tensors
// (blk.N.ffn_{gate,up,down}_exps.weight). docs/formats-gguf.md has the full
// mapping. llama.cpp does not implement this architecture: the file is for
// interchange and for our own reader, which rebuilds the legacy tensors
// (spec §6.1) exactly.
//
// Block N of the GGUF file is the legacy attention half-layer 2N plus the MoE
// half-layer 2N+1. One table (zaya_gguf_tensor_map, gguf_zaya_map.h) drives
// both directions.

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "zaya/formats/gguf_zaya_map.h"
#include "zaya/formats/hf_checkpoint.h"
#include "zaya/io/gguf.h"
#include "zaya/model/config.h"
#include "zaya/model/model.h"

namespace zaya {

// Writes `tensors` (legacy names and shapes, e.g. gathered from expert-parallel
// ranks) as a GGUF file, atomically. Every parameter and buffer of `config`
// must be present exactly once with its exact shape; a tied lm_head.weight is
// skipped; anything else is an error.
void write_zaya_gguf(const ZayaConfig& config, const std::vector<NamedTensor>& tensors, const std::string& path,
                     const GgufSaveOptions& options = {});

void save_gguf_model(const ZayaModel& model, const std::string& path, const GgufSaveOptions& options = {});

// A ZAYA GGUF file opened for reading: the config, and the legacy tensors
// assembled from the GGUF ones. open() checks the architecture, the layout
// version, the config and that the file holds exactly the tensors of the
// mapping with the right shapes and float types, before anything is read.
class ZayaGgufFile {
 public:
  struct LegacyTensor {
    std::string name;
    std::vector<int64_t> shape;
    int64_t numel = 0;
  };

  static ZayaGgufFile open(const std::string& path);

  const ZayaConfig& config() const { return config_; }
  const GgufFile& gguf() const { return file_; }
  // Parameters then buffers, in ParamTable order.
  const std::vector<LegacyTensor>& legacy_tensors() const { return legacy_; }
  // Copies legacy tensor `name` into dst (numel floats, Q8_0 dequantized); `expected_shape` must match.
  void read_legacy(const std::string& name, float* dst, const std::vector<int64_t>& expected_shape) const;

  // Whether any tensor is Q8_0 (a `--dtype q8_0` export), and whether legacy tensor `name` is.
  bool has_q8_0() const;
  bool is_q8_0(const std::string& name) const;
  // Copies a Q8_0 legacy tensor's blocks, as stored, into dst (rows x q8_0_row_bytes(cols) bytes).
  void read_legacy_q8_0(const std::string& name, uint8_t* dst, const std::vector<int64_t>& expected_shape) const;

 private:
  struct Source {  // where legacy elements [legacy_first, + count) are in the GGUF file
    std::string gguf_name;
    uint64_t gguf_first = 0;
    int64_t legacy_first = 0;
    int64_t count = 0;
  };
  ZayaGgufFile(GgufFile file, ZayaConfig config);
  const std::vector<Source>& sources_of(const std::string& name, const std::vector<int64_t>& expected_shape) const;

  GgufFile file_;
  ZayaConfig config_;
  std::vector<LegacyTensor> legacy_;
  std::unordered_map<std::string, size_t> legacy_index_;
  std::vector<std::vector<Source>> sources_;  // per legacy tensor
};

struct ZayaTensorData {
  std::string name;  // legacy name
  std::vector<int64_t> shape;
  std::vector<float> data;
};

struct ZayaGgufContents {
  ZayaConfig config;
  std::vector<ZayaTensorData> tensors;  // parameters then buffers, in ParamTable order
};

// Reads the whole file into memory as legacy tensors.
ZayaGgufContents read_zaya_gguf(const std::string& path);

// Loads the weights of a ZAYA GGUF file into a model with the same config
// (Q8_0 tensors dequantized; with skip_q8_0 left as they are, for a reader
// that takes their blocks with read_legacy_q8_0).
void load_gguf_weights(ZayaModel& model, const std::string& path);
void load_gguf_weights(ZayaModel& model, const ZayaGgufFile& file, bool skip_q8_0 = false);
std::unique_ptr<ZayaModel> load_gguf_model(const std::string& path);

}  // namespace zaya
