#include "zaya/bench/gemm_table.h"

#include <cmath>
#include <limits>

#include "zaya/core/error.h"
#include "zaya/io/json_file.h"

namespace zaya {
namespace {

nlohmann::json shape_json(const GemmShape& s) { return {{"m", s.m}, {"n", s.n}, {"k", s.k}, {"layout", s.layout()}}; }

GemmShape shape_from(const nlohmann::json& j, const std::string& where) {
  GemmShape s;
  for (const char* key : {"m", "n", "k"})
    ZAYA_CHECK(j.contains(key) && j[key].is_number_integer() && j[key].get<int64_t>() >= 1,
               "{}: '{}' must be a positive integer", where, key);
  s.m = j["m"].get<int64_t>();
  s.n = j["n"].get<int64_t>();
  s.k = j["k"].get<int64_t>();
  ZAYA_CHECK(j.contains("layout") && j["layout"].is_string(), "{}: 'layout' is missing", where);
  parse_gemm_layout(j["layout"].get<std::string>(), s.trans_a, s.trans_b);
  return s;
}

double number(const nlohmann::json& j, const char* key, const std::string& where) {
  ZAYA_CHECK(j.contains(key) && j[key].is_number(), "{}: '{}' must be a number", where, key);
  return j[key].get<double>();
}

}  // namespace

GemmTableEntry GemmEfficiencyTable::entry_from(const GemmResult& r, double peak) {
  GemmTableEntry e;
  e.dtype = r.timing.dtype;
  e.shape = r.timing.shape;
  e.gflops = r.timing.gflops;
  e.efficiency = peak > 0 ? r.timing.gflops / peak : 0;
  e.seconds = r.timing.best_seconds;
  e.median_seconds = r.timing.median_seconds;
  e.calls = r.timing.calls;
  e.intensity = r.intensity;
  e.memory_bound = r.memory_bound;
  e.falls_off = r.falls_off;
  e.falloff_reason = r.falloff_reason;
  e.has_padded = r.has_padded;
  if (r.has_padded) {
    e.padded = r.padded.shape;
    e.padded_seconds = r.padded.best_seconds;
  }
  return e;
}

nlohmann::json GemmEfficiencyTable::to_json() const {
  nlohmann::json je = nlohmann::json::array();
  for (const GemmTableEntry& e : entries) {
    nlohmann::json j = shape_json(e.shape);
    j["dtype"] = gemm_dtype_name(e.dtype);
    j["gflops"] = e.gflops;
    j["efficiency"] = e.efficiency;
    j["seconds"] = e.seconds;
    j["median_seconds"] = e.median_seconds;
    j["calls"] = e.calls;
    j["intensity"] = e.intensity;
    j["bound"] = e.memory_bound ? "memory" : "compute";
    j["falls_off"] = e.falls_off;
    j["falloff_reason"] = e.falloff_reason;
    if (e.has_padded) {
      nlohmann::json p = shape_json(e.padded);
      p["seconds"] = e.padded_seconds;
      j["padded"] = p;
    } else {
      j["padded"] = nullptr;
    }
    je.push_back(std::move(j));
  }
  nlohmann::json out = {{"bench", "gemm"},
                        {"format", "zaya.gemm_efficiency"},
                        {"format_version", 1},
                        {"machine", machine},
                        {"peak_gflops", peak_gflops},
                        {"membw_gbps", membw_gbps},
                        {"timing", {{"statistic", "fastest call"}, {"min_seconds", min_seconds}}},
                        {"entries", je}};
  if (!model.empty()) {
    nlohmann::json gemms = nlohmann::json::array();
    std::map<std::string, std::pair<double, double>> totals;  // dtype -> (flops, seconds) per step
    for (const GemmModelEntry& g : model_gemms) {
      nlohmann::json j = shape_json(g.shape);
      const double sec = g.entry >= 0 ? entries[size_t(g.entry)].seconds * g.count : 0;
      j["name"] = g.name;
      j["phase"] = g.phase;
      j["dtype"] = gemm_dtype_name(g.dtype);
      j["count"] = g.count;
      j["approximate"] = g.approximate;
      j["entry"] = g.entry;
      j["seconds_per_step"] = sec;
      gemms.push_back(std::move(j));
      auto& t = totals[gemm_dtype_name(g.dtype)];
      t.first += g.shape.flops() * g.count;
      t.second += sec;
    }
    nlohmann::json summary = nlohmann::json::object();
    for (const auto& [dtype, t] : totals) {
      const double peak = peak_gflops.count(dtype) ? peak_gflops.at(dtype) : 0;
      summary[dtype] = {{"gemm_flops_per_step", t.first},
                        {"gemm_seconds_per_step", t.second},
                        {"gflops", t.second > 0 ? t.first / t.second / 1e9 : 0},
                        {"efficiency", t.second > 0 && peak > 0 ? t.first / t.second / 1e9 / peak : 0}};
    }
    out["model"] = {{"config", model},
                    {"micro_batch", micro_batch},
                    {"seq_len", seq_len},
                    {"tokens", micro_batch * seq_len},
                    {"ep", ep},
                    {"skip_fraction", skip_fraction},
                    {"expert_tokens", expert_tokens},
                    {"gemms", gemms},
                    {"summary", summary}};
  }
  return out;
}

GemmEfficiencyTable GemmEfficiencyTable::from_json(const nlohmann::json& j, const std::string& src) {
  ZAYA_CHECK(j.is_object() && j.value("format", "") == "zaya.gemm_efficiency",
             "{}: not a GEMM efficiency table (format 'zaya.gemm_efficiency')", src);
  ZAYA_CHECK(j.value("format_version", 0) == 1, "{}: format_version {} is not supported (expected 1)", src,
             j.value("format_version", 0));
  GemmEfficiencyTable t;
  ZAYA_CHECK(j.contains("peak_gflops") && j["peak_gflops"].is_object(), "{}: 'peak_gflops' is missing", src);
  for (const auto& [k, v] : j["peak_gflops"].items()) {
    ZAYA_CHECK(v.is_number() && v.get<double>() > 0, "{}: peak_gflops.{} must be a positive number", src, k);
    t.peak_gflops[k] = v.get<double>();
  }
  t.membw_gbps = j.value("membw_gbps", 0.0);
  if (j.contains("machine") && j["machine"].is_object()) t.machine = j["machine"];
  ZAYA_CHECK(j.contains("entries") && j["entries"].is_array(), "{}: 'entries' is missing", src);
  int i = 0;
  for (const auto& je : j["entries"]) {
    const std::string where = fmt::format("{}: entries[{}]", src, i++);
    GemmTableEntry e;
    ZAYA_CHECK(je.contains("dtype") && je["dtype"].is_string(), "{}: 'dtype' is missing", where);
    e.dtype = parse_gemm_dtype(je["dtype"].get<std::string>());
    e.shape = shape_from(je, where);
    e.gflops = number(je, "gflops", where);
    e.efficiency = number(je, "efficiency", where);
    e.seconds = number(je, "seconds", where);
    e.median_seconds = je.value("median_seconds", e.seconds);
    e.calls = je.value("calls", 0);
    e.intensity = je.value("intensity", 0.0);
    e.memory_bound = je.value("bound", "compute") == "memory";
    e.falls_off = je.value("falls_off", false);
    e.falloff_reason = je.value("falloff_reason", "");
    if (je.contains("padded") && je["padded"].is_object()) {
      e.has_padded = true;
      e.padded = shape_from(je["padded"], where + ".padded");
      e.padded_seconds = number(je["padded"], "seconds", where + ".padded");
    }
    t.entries.push_back(std::move(e));
  }
  if (j.contains("model") && j["model"].is_object()) {
    const auto& m = j["model"];
    t.model = m.value("config", "");
    t.micro_batch = m.value("micro_batch", int64_t(0));
    t.seq_len = m.value("seq_len", int64_t(0));
    t.ep = m.value("ep", int64_t(1));
    t.skip_fraction = m.value("skip_fraction", 0.0);
    t.expert_tokens = m.value("expert_tokens", int64_t(0));
    int g = 0;
    for (const auto& jg : m.value("gemms", nlohmann::json::array())) {
      const std::string where = fmt::format("{}: model.gemms[{}]", src, g++);
      GemmModelEntry e;
      e.name = jg.value("name", "");
      e.phase = jg.value("phase", "");
      e.dtype = parse_gemm_dtype(jg.value("dtype", "f32"));
      e.shape = shape_from(jg, where);
      e.count = number(jg, "count", where);
      e.approximate = jg.value("approximate", false);
      e.entry = jg.value("entry", -1);
      ZAYA_CHECK(e.entry >= -1 && e.entry < int(t.entries.size()), "{}: 'entry' {} is out of range", where, e.entry);
      t.model_gemms.push_back(std::move(e));
    }
  }
  return t;
}

GemmEfficiencyTable GemmEfficiencyTable::load(const std::string& path) {
  return from_json(read_json_file(path, "GEMM efficiency table"), path);
}

double GemmEfficiencyTable::efficiency(GemmDType dtype, const GemmShape& s) const {
  const GemmTableEntry* best = nullptr;
  double best_d = std::numeric_limits<double>::infinity();
  for (const GemmTableEntry& e : entries) {
    if (e.dtype != dtype) continue;
    double d = std::abs(std::log(double(e.shape.m) / double(s.m))) +
               std::abs(std::log(double(e.shape.n) / double(s.n))) +
               std::abs(std::log(double(e.shape.k) / double(s.k)));
    if (e.shape.trans_a != s.trans_a || e.shape.trans_b != s.trans_b) d += std::log(2.0);
    if (d < best_d) {
      best_d = d;
      best = &e;
    }
  }
  ZAYA_CHECK(best != nullptr, "the GEMM efficiency table has no {} entries", gemm_dtype_name(dtype));
  return best->efficiency;
}

double GemmEfficiencyTable::estimate_seconds(GemmDType dtype, const GemmShape& s) const {
  const auto it = peak_gflops.find(gemm_dtype_name(dtype));
  ZAYA_CHECK(it != peak_gflops.end(), "the GEMM efficiency table has no {} peak", gemm_dtype_name(dtype));
  const double eff = efficiency(dtype, s);
  ZAYA_CHECK(eff > 0, "the GEMM efficiency table gives {} shape {}x{}x{} no throughput", gemm_dtype_name(dtype), s.m,
             s.n, s.k);
  return s.flops() / (eff * it->second * 1e9);
}

}  // namespace zaya
