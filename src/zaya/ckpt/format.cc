#include "zaya/ckpt/format.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "zaya/core/error.h"
#include "zaya/io/json_file.h"

namespace zaya {

using json = nlohmann::json;

size_t ckpt_dtype_bytes(CkptDType t) { return t == CkptDType::kF64 ? 8 : 4; }
const char* ckpt_dtype_name(CkptDType t) { return t == CkptDType::kF64 ? "F64" : "F32"; }

int64_t CkptTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string checkpoint_dir_name(int64_t step) { return fmt::format("step_{:08}", step); }

json CheckpointMeta::to_json() const {
  json j;
  j["format"] = kCheckpointFormat;
  j["version"] = kCheckpointVersion;
  j["run_id"] = run_id;
  j["step"] = step;
  j["layout"] = {{"world", world}, {"dp", dp}, {"ep", ep}, {"cp", cp}};
  json files_j = json::array();
  for (const CkptFile& f : files) files_j.push_back({{"name", f.name}, {"bytes", f.bytes}});
  j["files"] = files_j;
  json tensors_j = json::object();
  for (const auto& [name, t] : tensors) {
    json slices = json::array();
    for (const CkptSlice& s : t.slices)
      slices.push_back({{"file", s.file},
                        {"offset", s.offset},
                        {"bytes", s.bytes},
                        {"start", s.start},
                        {"count", s.count},
                        {"xxh3", fmt::format("{:016x}", s.xxh3)}});
    tensors_j[name] = {{"dtype", ckpt_dtype_name(t.dtype)}, {"shape", t.shape}, {"slices", slices}};
  }
  j["tensors"] = tensors_j;
  j["state"] = state;
  j["config"] = config_toml;
  if (!model_config.is_null()) j["model"] = model_config;
  if (!tokenizer.empty()) j["tokenizer"] = tokenizer;
  return j;
}

namespace {

[[noreturn]] void bad(const std::string& source, const std::string& field, const std::string& problem) {
  fail("{}: {}: {}", source, field, problem);
}

const json& need(const json& j, const char* key, const std::string& source, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) bad(source, where.empty() ? key : where + "." + key, "missing");
  return j[key];
}

int64_t need_int(const json& j, const char* key, const std::string& source, const std::string& where, int64_t lo,
                 int64_t hi) {
  const json& v = need(j, key, source, where);
  const std::string field = where.empty() ? key : where + "." + key;
  if (!v.is_number_integer()) bad(source, field, "expected an integer, found " + json_preview(v));
  const int64_t x = v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX) ? -1 : v.get<int64_t>();
  if (x < lo || x > hi) bad(source, field, fmt::format("{} is out of range {}..{}", json_preview(v), lo, hi));
  return x;
}

}  // namespace

CheckpointMeta CheckpointMeta::from_json(const json& j, const std::string& source) {
  if (!j.is_object()) bad(source, "(top level)", "expected a JSON object");
  if (need(j, "format", source, "") != kCheckpointFormat)
    bad(source, "format", fmt::format("expected \"{}\" (not a zaya checkpoint)", kCheckpointFormat));
  const int64_t version = need_int(j, "version", source, "", 1, 1000);
  if (version != kCheckpointVersion)
    bad(source, "version",
        fmt::format("{} is not supported (this zaya reads version {})", version, kCheckpointVersion));
  CheckpointMeta m;
  const json& run = need(j, "run_id", source, "");
  if (!run.is_string()) bad(source, "run_id", "expected a string");
  m.run_id = run.get<std::string>();
  m.step = need_int(j, "step", source, "", 0, INT64_MAX);
  const json& layout = need(j, "layout", source, "");
  m.world = int(need_int(layout, "world", source, "layout", 1, 1 << 20));
  m.dp = int(need_int(layout, "dp", source, "layout", 1, 1 << 20));
  m.ep = int(need_int(layout, "ep", source, "layout", 1, 1 << 20));
  if (layout.contains("cp")) m.cp = int(need_int(layout, "cp", source, "layout", 1, 1 << 20));
  if (int64_t(m.dp) * m.ep * m.cp != m.world) bad(source, "layout", "dp x ep x cp does not equal world");
  const json& files = need(j, "files", source, "");
  if (!files.is_array() || files.size() > 1000000) bad(source, "files", "expected a list of files");
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string where = fmt::format("files[{}]", i);
    CkptFile f;
    const json& name = need(files[i], "name", source, where);
    if (!name.is_string()) bad(source, where + ".name", "expected a string");
    f.name = name.get<std::string>();
    if (f.name.empty() || f.name.find('/') != std::string::npos || f.name[0] == '.')
      bad(source, where + ".name", "must be a plain file name inside the checkpoint directory");
    f.bytes = uint64_t(need_int(files[i], "bytes", source, where, 0, INT64_MAX));
    m.files.push_back(f);
  }
  const json& tensors = need(j, "tensors", source, "");
  if (!tensors.is_object()) bad(source, "tensors", "expected an object");
  for (auto it = tensors.begin(); it != tensors.end(); ++it) {
    const std::string where = "tensors[\"" + it.key() + "\"]";
    CkptTensor t;
    t.name = it.key();
    const json& dt = need(it.value(), "dtype", source, where);
    if (dt == "F32")
      t.dtype = CkptDType::kF32;
    else if (dt == "F64")
      t.dtype = CkptDType::kF64;
    else
      bad(source, where + ".dtype", json_preview(dt) + " is not supported; allowed: \"F32\", \"F64\"");
    const json& shape = need(it.value(), "shape", source, where);
    if (!shape.is_array() || shape.size() > 8) bad(source, where + ".shape", "expected a list of at most 8 sizes");
    int64_t numel = 1;
    for (const json& d : shape) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0 || d.get<int64_t>() > (int64_t(1) << 40))
        bad(source, where + ".shape", "sizes must be integers in 0..2^40");
      if (d.get<int64_t>() > 0 && numel > (int64_t(1) << 50) / d.get<int64_t>())
        bad(source, where + ".shape", "too large");
      numel *= d.get<int64_t>();
      t.shape.push_back(d.get<int64_t>());
    }
    const json& slices = need(it.value(), "slices", source, where);
    if (!slices.is_array() || slices.empty() || slices.size() > 1000000)
      bad(source, where + ".slices", "expected a non-empty list");
    for (size_t k = 0; k < slices.size(); ++k) {
      const std::string sw = fmt::format("{}.slices[{}]", where, k);
      CkptSlice s;
      s.file = int32_t(need_int(slices[k], "file", source, sw, 0, int64_t(m.files.size()) - 1));
      s.offset = uint64_t(need_int(slices[k], "offset", source, sw, 0, INT64_MAX));
      s.bytes = uint64_t(need_int(slices[k], "bytes", source, sw, 0, INT64_MAX));
      s.start = need_int(slices[k], "start", source, sw, 0, numel);
      s.count = need_int(slices[k], "count", source, sw, 0, numel - s.start);
      const json& h = need(slices[k], "xxh3", source, sw);
      if (!h.is_string() || h.get<std::string>().size() != 16) bad(source, sw + ".xxh3", "expected 16 hex digits");
      try {
        size_t used = 0;
        s.xxh3 = std::stoull(h.get<std::string>(), &used, 16);
        if (used != 16) throw std::invalid_argument("hex");
      } catch (const std::exception&) {
        bad(source, sw + ".xxh3", "expected 16 hex digits");
      }
      if (s.bytes != uint64_t(s.count) * ckpt_dtype_bytes(t.dtype))
        bad(source, sw, fmt::format("{} bytes do not hold {} {} elements", s.bytes, s.count, ckpt_dtype_name(t.dtype)));
      if (s.offset > m.files[s.file].bytes || s.bytes > m.files[s.file].bytes - s.offset)
        bad(source, sw,
            fmt::format("bytes {}..{} lie outside {} ({} bytes)", s.offset, s.offset + s.bytes, m.files[s.file].name,
                        m.files[s.file].bytes));
      t.slices.push_back(s);
    }
    // The slices must tile the tensor exactly.
    std::vector<CkptSlice> sorted = t.slices;
    std::sort(sorted.begin(), sorted.end(), [](const CkptSlice& a, const CkptSlice& b) { return a.start < b.start; });
    int64_t next = 0;
    for (const CkptSlice& s : sorted) {
      if (s.start != next) bad(source, where + ".slices", fmt::format("elements from {} are missing or overlap", next));
      next += s.count;
    }
    if (next != numel) bad(source, where + ".slices", fmt::format("cover {} of {} elements", next, numel));
    m.tensors.emplace(t.name, std::move(t));
  }
  const json& state = need(j, "state", source, "");
  if (!state.is_object()) bad(source, "state", "expected an object");
  m.state = state;
  const json& config = need(j, "config", source, "");
  if (!config.is_string()) bad(source, "config", "expected the training config as a string");
  m.config_toml = config.get<std::string>();
  if (j.contains("model")) {
    if (!j["model"].is_object()) bad(source, "model", "expected the model's config.json as an object");
    m.model_config = j["model"];
  }
  if (j.contains("tokenizer")) {
    if (!j["tokenizer"].is_string()) bad(source, "tokenizer", "expected a path");
    m.tokenizer = j["tokenizer"].get<std::string>();
  }
  return m;
}

}  // namespace zaya
