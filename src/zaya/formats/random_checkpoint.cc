#include "zaya/formats/random_checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "zaya/core/bf16.h"
#include "zaya/core/error.h"
#include "zaya/formats/hf_config.h"
#include "zaya/formats/native_config.h"
#include "zaya/io/atomic_file.h"
#include "zaya/io/safetensors_dir.h"
#include "zaya/io/safetensors_writer.h"
#include "zaya/model/params.h"
#include "zaya/model/tensor_table.h"
#include "zaya/model/weights.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;

// One tensor of the file: its parameter entries (the experts of a native
// stacked tensor, in order) or one buffer.
struct FileTensor {
  std::string name;
  std::vector<int64_t> shape;
  bool f32 = false;
  bool buffer = false;
  std::vector<const ParamEntry*> parts;
};

std::vector<FileTensor> plan_tensors(const ZayaConfig& c, const ParamTable& params, const ParamTable& buffers,
                                     bool native, bool f32) {
  std::vector<FileTensor> out;
  std::map<std::string, size_t> stacked;  // native [E, ...] tensor -> its index in out
  auto add = [&](const ParamEntry& e, bool buffer) {
    const NativeTensorRef r = native ? native_tensor_ref(e.role, e.half_layer, e.expert, c) : NativeTensorRef{e.name};
    if (r.expert >= 0) {
      auto [it, fresh] = stacked.try_emplace(r.name, out.size());
      if (fresh) {
        FileTensor t{r.name, e.shape, f32 || buffer, buffer, {}};
        t.shape.insert(t.shape.begin(), c.experts);
        out.push_back(std::move(t));
      }
      std::vector<const ParamEntry*>& parts = out[it->second].parts;
      ZAYA_ASSERT(int64_t(parts.size()) == r.expert);
      parts.push_back(&e);
      return;
    }
    out.push_back({r.name, e.shape, f32 || buffer, buffer, {&e}});
  };
  for (const ParamEntry& e : params.entries()) add(e, false);
  for (const ParamEntry& e : buffers.entries()) add(e, true);
  return out;
}

}  // namespace

RandomCheckpointSummary write_random_model_directory(const ZayaConfig& c, const std::string& dir,
                                                     const RandomCheckpointOptions& options) {
  ZAYA_CHECK(options.dtype == "bf16" || options.dtype == "f32", "--dtype '{}' is invalid; allowed: bf16, f32",
             options.dtype);
  c.validate("zaya ckpt random");
  const bool native = options.layout == DirectoryLayout::kNative;
  if (native) {
    const std::string problem = native_layout_problem(c);
    ZAYA_CHECK(problem.empty(), "--layout native: {}; use --layout legacy", problem);
  }
  std::error_code ec;
  ZAYA_CHECK(!fs::exists(dir, ec) || fs::is_empty(dir, ec), "--out '{}' exists and is not empty; give a new directory",
             dir);
  fs::create_directories(dir, ec);
  ZAYA_CHECK(!ec, "--out '{}': cannot create the directory: {}", dir, ec.message());
  // Every expert of every layer (the whole model), and the buffers' initial values (small).
  const ParamTable params(c, true), buffers(c, false);
  std::vector<float> buffer_values(size_t(std::max<int64_t>(buffers.total_floats(), 1)));
  init_buffers(c, buffers, buffer_values.data());
  const bool f32 = options.dtype == "f32";
  const std::vector<FileTensor> tensors = plan_tensors(c, params, buffers, native, f32);
  // The shards: the same split write_sharded makes, from the tensors' byte sizes.
  std::vector<uint64_t> nbytes;
  for (const FileTensor& t : tensors) {
    uint64_t numel = 1;
    for (int64_t dim : t.shape) numel *= uint64_t(dim);
    nbytes.push_back(numel * (t.f32 ? sizeof(float) : sizeof(uint16_t)));
  }
  const std::vector<size_t> starts = SafetensorsWriter::shard_starts(nbytes, options.max_shard_bytes);
  uint64_t total_bytes = 0;
  for (uint64_t b : nbytes) total_bytes += b;
  RandomCheckpointSummary summary;
  nlohmann::json weight_map = nlohmann::json::object();
  std::vector<float> values;
  for (size_t i = 0; i < starts.size(); ++i) {
    const std::string file = starts.size() == 1
                                 ? std::string(kSafetensorsSingleFile)
                                 : fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, starts.size());
    const size_t first = starts[i], end = i + 1 < starts.size() ? starts[i + 1] : tensors.size();
    uint64_t shard_bytes = 0;
    for (size_t j = first; j < end; ++j) shard_bytes += nbytes[j];
    // This shard's bytes, filled one parameter at a time.
    std::vector<uint8_t> data(static_cast<size_t>(shard_bytes));
    SafetensorsWriter w;
    w.set_metadata("format", "pt");
    uint64_t at = 0;
    for (size_t j = first; j < end; ++j) {
      const FileTensor& t = tensors[j];
      uint8_t* dst = data.data() + at;
      for (const ParamEntry* e : t.parts) {
        const float* v = buffer_values.data() + e->offset;
        if (!t.buffer) {
          values.resize(size_t(e->numel));
          init_param(*e, values.data(), c, options.seed);
          v = values.data();
        }
        if (t.f32) {
          std::memcpy(dst, v, sizeof(float) * size_t(e->numel));
          dst += sizeof(float) * size_t(e->numel);
        } else {
          auto* out = reinterpret_cast<uint16_t*>(dst);
#pragma omp parallel for schedule(static) if (e->numel > 65536)
          for (int64_t k = 0; k < e->numel; ++k) out[k] = float_to_bf16(v[k]);
          dst += sizeof(uint16_t) * size_t(e->numel);
        }
      }
      ZAYA_ASSERT(uint64_t(dst - (data.data() + at)) == nbytes[j]);
      w.add_raw(t.name, t.f32 ? SafetensorsDtype::kF32 : SafetensorsDtype::kBF16, t.shape, data.data() + at);
      at += nbytes[j];
      weight_map[t.name] = file;
      ++summary.tensors;
    }
    w.write((fs::path(dir) / file).string());
    summary.bytes += at;
    ++summary.files;
  }
  if (starts.size() > 1) {
    const nlohmann::json index = {{"metadata", {{"total_size", total_bytes}}}, {"weight_map", weight_map}};
    write_file_atomic((fs::path(dir) / kSafetensorsIndexFile).string(), index.dump(2) + "\n");
  }
  const std::string dtype = f32 ? "float32" : "bfloat16";
  const nlohmann::json config_json = native ? config_to_native_json(c, dtype) : config_to_hf_json(c, dtype);
  write_file_atomic((fs::path(dir) / "config.json").string(), config_json.dump(2) + "\n");
  return summary;
}

}  // namespace zaya
