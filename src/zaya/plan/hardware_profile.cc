#include "zaya/plan/hardware_profile.h"

#include <filesystem>

#include "zaya/core/error.h"
#include "zaya/io/atomic_file.h"
#include "zaya/io/json_file.h"
#include "zaya/plan/builtin_profiles.h"

namespace zaya {
namespace {

constexpr const char* kFormat = "zaya.hardware_profile";
constexpr int kVersion = 1;

nlohmann::json figure_json(const Figure& f) {
  nlohmann::json j = {{"value", f.value}, {"source", f.source}};
  if (!f.note.empty()) j["note"] = f.note;
  return j;
}

// Reads obj[key] as a Figure; `where` is "FILE: device.membw_gbps"-like
// context.
Figure figure_from(const nlohmann::json& obj, const char* key, const std::string& where, bool required = true) {
  Figure f;
  const std::string field = where + "." + key;
  if (!obj.contains(key)) {
    ZAYA_CHECK(!required,
               "{} is missing (an object {{\"value\": number, \"source\": "
               "\"vendor|measured|estimate\"}})",
               field);
    return f;
  }
  const nlohmann::json& j = obj[key];
  ZAYA_CHECK(j.is_object() && j.contains("value") && j["value"].is_number(),
             "{} must be an object {{\"value\": number, \"source\": "
             "\"vendor|measured|estimate\"}}",
             field);
  f.value = j["value"].get<double>();
  ZAYA_CHECK(j.contains("source") && j["source"].is_string(),
             "{}.source is missing; allowed: vendor, measured, estimate", field);
  f.source = j["source"].get<std::string>();
  ZAYA_CHECK(f.source == "vendor" || f.source == "measured" || f.source == "estimate",
             "{}.source = '{}' is invalid; allowed: vendor, measured, estimate", field, f.source);
  if (j.contains("note")) {
    ZAYA_CHECK(j["note"].is_string(), "{}.note must be a string", field);
    f.note = j["note"].get<std::string>();
  }
  return f;
}

int64_t integer(const nlohmann::json& obj, const char* key, const std::string& where, int64_t lo, int64_t hi) {
  ZAYA_CHECK(obj.contains(key) && obj[key].is_number_integer(), "{}.{} must be an integer in {}..{}", where, key, lo,
             hi);
  const int64_t v = obj[key].get<int64_t>();
  ZAYA_CHECK(v >= lo && v <= hi, "{}.{} = {} is invalid; allowed: {}..{}", where, key, v, lo, hi);
  return v;
}

const nlohmann::json& object(const nlohmann::json& obj, const char* key, const std::string& where) {
  ZAYA_CHECK(obj.contains(key) && obj[key].is_object(), "{}.{} is missing or not an object", where, key);
  return obj[key];
}

std::string text(const nlohmann::json& obj, const char* key, const std::string& where, bool required = true) {
  if (!obj.contains(key)) {
    ZAYA_CHECK(!required, "{}.{} is missing (a string)", where, key);
    return "";
  }
  ZAYA_CHECK(obj[key].is_string(), "{}.{} must be a string", where, key);
  return obj[key].get<std::string>();
}

}  // namespace

double HardwareProfile::peak_gflops(const std::string& dtype) const {
  if (dtype == "f32") return peak_f32_gflops.value;
  if (dtype == "bf16") return peak_bf16_gflops.value;
  fail("unknown GEMM dtype '{}'; allowed: f32, bf16", dtype);
}

nlohmann::json HardwareProfile::to_json() const {
  nlohmann::json curves = nlohmann::json::array();
  for (const CommCurve& c : comm) {
    nlohmann::json pts = nlohmann::json::array();
    for (const CommCurvePoint& p : c.points) pts.push_back({p.bytes, p.busbw_gbps});
    curves.push_back(
        {{"collective", c.collective}, {"ranks", c.ranks}, {"scope", c.scope}, {"source", c.source}, {"points", pts}});
  }
  nlohmann::json j = {
      {"format", kFormat},
      {"format_version", kVersion},
      {"name", name},
      {"description", description},
      {"device",
       {{"kind", device_kind},
        {"peak_gflops", {{"f32", figure_json(peak_f32_gflops)}, {"bf16", figure_json(peak_bf16_gflops)}}},
        {"membw_gbps", figure_json(membw_gbps)},
        {"memory_gib", figure_json(memory_gib)},
        {"gemm_efficiency", figure_json(gemm_efficiency)},
        {"stream_gbps", figure_json(stream_gbps)},
        {"exp_per_second", figure_json(exp_per_second)},
        {"op_overhead_us", figure_json(op_overhead_us)},
        {"compute_units", compute_units},
        {"tile", {{"m", tile_m}, {"n", tile_n}}},
        {"align", align}}},
      {"cluster", {{"devices_per_node", devices_per_node}, {"max_devices", max_devices}}},
      {"measured_with", {{"ranks", ranks_measured}, {"threads_per_rank", threads_per_rank}}},
      {"interconnect", curves},
      {"gemm_table", gemm_table ? gemm_table->to_json() : nlohmann::json(nullptr)}};
  return j;
}

HardwareProfile HardwareProfile::from_json(const nlohmann::json& j, const std::string& source) {
  ZAYA_CHECK(j.is_object(), "{}: a hardware profile must be a JSON object", source);
  ZAYA_CHECK(j.contains("format") && j["format"] == kFormat, "{}: 'format' must be \"{}\" (is this a profile?)", source,
             kFormat);
  ZAYA_CHECK(j.contains("format_version") && j["format_version"] == kVersion,
             "{}: format_version must be {}; this zaya reads version {} only", source, kVersion, kVersion);
  HardwareProfile p;
  p.name = text(j, "name", source);
  p.description = text(j, "description", source, false);
  const std::string dw = source + ": device";
  const nlohmann::json& d = object(j, "device", source + ":");
  p.device_kind = text(d, "kind", dw);
  ZAYA_CHECK(p.device_kind == "gpu" || p.device_kind == "cpu", "{}.kind = '{}' is invalid; allowed: gpu, cpu", dw,
             p.device_kind);
  const nlohmann::json& pk = object(d, "peak_gflops", dw);
  p.peak_f32_gflops = figure_from(pk, "f32", dw + ".peak_gflops");
  p.peak_bf16_gflops = figure_from(pk, "bf16", dw + ".peak_gflops");
  p.membw_gbps = figure_from(d, "membw_gbps", dw);
  p.memory_gib = figure_from(d, "memory_gib", dw);
  p.gemm_efficiency = figure_from(d, "gemm_efficiency", dw);
  p.stream_gbps = figure_from(d, "stream_gbps", dw);
  p.exp_per_second = figure_from(d, "exp_per_second", dw, false);
  p.op_overhead_us = figure_from(d, "op_overhead_us", dw, false);
  p.compute_units = integer(d, "compute_units", dw, 1, 1 << 20);
  const nlohmann::json& tile = object(d, "tile", dw);
  p.tile_m = integer(tile, "m", dw + ".tile", 1, 4096);
  p.tile_n = integer(tile, "n", dw + ".tile", 1, 4096);
  p.align = integer(d, "align", dw, 1, 4096);
  const std::string cw = source + ": cluster";
  const nlohmann::json& cl = object(j, "cluster", source + ":");
  p.devices_per_node = integer(cl, "devices_per_node", cw, 1, 1 << 16);
  p.max_devices = integer(cl, "max_devices", cw, 1, int64_t(1) << 24);
  if (j.contains("measured_with")) {
    const std::string mw = source + ": measured_with";
    p.ranks_measured = integer(j["measured_with"], "ranks", mw, 1, 1 << 16);
    p.threads_per_rank = integer(j["measured_with"], "threads_per_rank", mw, 0, 1 << 16);
  }
  if (j.contains("interconnect")) {
    ZAYA_CHECK(j["interconnect"].is_array(), "{}: interconnect must be an array of curves", source);
    size_t i = 0;
    for (const nlohmann::json& c : j["interconnect"]) {
      const std::string w = fmt::format("{}: interconnect[{}]", source, i++);
      ZAYA_CHECK(c.is_object(), "{} must be an object", w);
      CommCurve curve;
      curve.collective = text(c, "collective", w);
      curve.ranks = int(integer(c, "ranks", w, 2, int64_t(1) << 24));
      curve.scope = text(c, "scope", w);
      curve.source = text(c, "source", w);
      ZAYA_CHECK(c.contains("points") && c["points"].is_array(), "{}.points must be an array of [bytes, busbw_gbps]",
                 w);
      for (const nlohmann::json& pt : c["points"]) {
        ZAYA_CHECK(pt.is_array() && pt.size() == 2 && pt[0].is_number() && pt[1].is_number(),
                   "{}.points: each point must be [bytes, busbw_gbps], got {}", w, json_preview(pt));
        curve.points.push_back({pt[0].get<double>(), pt[1].get<double>()});
      }
      p.comm.push_back(std::move(curve));
    }
  }
  if (j.contains("gemm_table") && !j["gemm_table"].is_null())
    p.gemm_table = GemmEfficiencyTable::from_json(j["gemm_table"], source + ": gemm_table");
  p.validate(source);
  return p;
}

void HardwareProfile::validate(const std::string& source) const {
  const std::string dw = source + ": device";
  ZAYA_CHECK(!name.empty(), "{}: name must not be empty", source);
  for (auto [field, f] : {std::pair{"peak_gflops.f32", &peak_f32_gflops},
                          std::pair{"peak_gflops.bf16", &peak_bf16_gflops}, std::pair{"membw_gbps", &membw_gbps},
                          std::pair{"memory_gib", &memory_gib}, std::pair{"stream_gbps", &stream_gbps}})
    ZAYA_CHECK(f->value > 0 && f->value < 1e12, "{}.{}.value = {} is invalid; allowed: > 0", dw, field, f->value);
  ZAYA_CHECK(gemm_efficiency.value > 0 && gemm_efficiency.value <= 1,
             "{}.gemm_efficiency.value = {} is invalid; allowed: (0, 1]", dw, gemm_efficiency.value);
  ZAYA_CHECK(exp_per_second.value >= 0, "{}.exp_per_second.value = {} is invalid; allowed: >= 0 (0: no limit)", dw,
             exp_per_second.value);
  ZAYA_CHECK(op_overhead_us.value >= 0, "{}.op_overhead_us.value = {} is invalid; allowed: >= 0", dw,
             op_overhead_us.value);
  ZAYA_CHECK(max_devices >= devices_per_node || max_devices == 1,
             "{}: cluster.max_devices = {} is invalid; allowed: >= "
             "devices_per_node ({})",
             source, max_devices, devices_per_node);
  static const char* kCollectives[] = {"all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast"};
  for (size_t i = 0; i < comm.size(); ++i) {
    const CommCurve& c = comm[i];
    const std::string w = fmt::format("{}: interconnect[{}]", source, i);
    bool known = false;
    for (const char* k : kCollectives) known = known || c.collective == k;
    ZAYA_CHECK(known,
               "{}.collective = '{}' is invalid; allowed: all_reduce, "
               "reduce_scatter, all_gather, all_to_all, "
               "broadcast",
               w, c.collective);
    ZAYA_CHECK(c.scope == "intra" || c.scope == "inter", "{}.scope = '{}' is invalid; allowed: intra, inter", w,
               c.scope);
    ZAYA_CHECK(c.source == "vendor" || c.source == "measured" || c.source == "estimate",
               "{}.source = '{}' is invalid; allowed: vendor, measured, estimate", w, c.source);
    ZAYA_CHECK(!c.points.empty(), "{}.points must not be empty", w);
    for (size_t k = 0; k < c.points.size(); ++k) {
      ZAYA_CHECK(c.points[k].bytes > 0 && c.points[k].busbw_gbps > 0,
                 "{}.points[{}] = [{}, {}] is invalid; allowed: bytes > 0 and "
                 "busbw_gbps > 0",
                 w, k, c.points[k].bytes, c.points[k].busbw_gbps);
      ZAYA_CHECK(k == 0 || c.points[k].bytes > c.points[k - 1].bytes,
                 "{}.points must be in ascending order of bytes (point {} is not)", w, k);
    }
  }
}

HardwareProfile HardwareProfile::load(const std::string& path) {
  return from_json(read_json_file(path, "hardware profile"), path);
}

void HardwareProfile::save(const std::string& path) const { write_file_atomic(path, to_json().dump(1) + "\n"); }

HardwareProfile resolve_profile(const std::string& name_or_path) {
  if (const HardwareProfile* p = find_builtin_profile(name_or_path)) return *p;
  if (std::filesystem::exists(name_or_path)) return HardwareProfile::load(name_or_path);
  std::string names;
  for (const HardwareProfile& p : builtin_profiles()) names += (names.empty() ? "" : ", ") + p.name;
  fail(
      "unknown hardware profile '{}'; allowed: a built-in profile ({}) or a "
      "profile JSON file",
      name_or_path, names);
}

}  // namespace zaya
