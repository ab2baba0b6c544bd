#include "zaya/bench/gemm_run.h"

#include <fmt/ranges.h>
#include <algorithm>

#include <filesystem>

#include "zaya/bench/machine_info.h"
#include "zaya/bench/stream.h"
#include "zaya/core/error.h"
#include "zaya/formats/hf_config.h"

namespace zaya {
namespace {

// Peaks and bandwidth first: the table's header.
GemmEfficiencyTable start_table(const GemmRunOptions& o) {
  GemmEfficiencyTable t;
  t.machine = machine_json(machine_info());
  t.min_seconds = o.timing.min_seconds;
  for (GemmDType d : o.dtypes) {
    const double given = d == GemmDType::kF32 ? o.peak_f32 : o.peak_bf16;
    const int64_t side = d == GemmDType::kF32 ? o.peak_side_f32 : o.peak_side_bf16;
    t.peak_gflops[gemm_dtype_name(d)] = given > 0 ? given : measure_gemm_peak_gflops(d, side, o.timing);
  }
  t.membw_gbps = o.membw_gbps > 0 ? o.membw_gbps : measure_dram_bandwidth_gbps();
  return t;
}

// Times the distinct shapes of one dtype and judges them; returns entry indices in `shapes` order.
std::vector<int> measure(GemmEfficiencyTable& t, GemmDType d, const std::vector<GemmShape>& shapes,
                         const GemmRunOptions& o, const GemmProgress& on_entry) {
  std::vector<GemmShape> distinct;
  for (const GemmShape& s : shapes)
    if (std::find(distinct.begin(), distinct.end(), s) == distinct.end()) distinct.push_back(s);
  const double peak = t.peak_gflops.at(gemm_dtype_name(d));
  const double balance = t.membw_gbps > 0 ? peak / t.membw_gbps : 0;  // FLOP per byte
  std::vector<GemmResult> results;
  std::vector<int> result_of(distinct.size(), -1);
  for (size_t i = 0; i < distinct.size(); ++i) {
    const GemmShape& s = distinct[i];
    const GemmShape padded = padded_shape(s, std::max<int64_t>(1, o.align));
    if (gemm_bytes(d, o.align > 0 ? padded : s) > o.max_bytes) {
      if (on_entry) on_entry(d, s, nullptr);
      continue;
    }
    GemmResult r;
    r.timing = time_gemm(d, s, o.timing);
    r.efficiency = r.timing.gflops / peak;
    r.intensity = arithmetic_intensity(d, s);
    r.memory_bound = r.intensity < balance;
    if (o.align > 0 && !(padded == s)) {
      r.has_padded = true;
      r.padded = time_gemm(d, padded, o.timing);
    }
    result_of[i] = int(results.size());
    results.push_back(std::move(r));
  }
  mark_falloffs(results, o.falloff);
  std::vector<int> entry_of_distinct(distinct.size(), -1);
  for (size_t i = 0; i < distinct.size(); ++i) {
    if (result_of[i] < 0) continue;
    entry_of_distinct[i] = int(t.entries.size());
    t.entries.push_back(GemmEfficiencyTable::entry_from(results[size_t(result_of[i])], peak));
    if (on_entry) on_entry(d, distinct[i], &t.entries.back());
  }
  std::vector<int> out;
  for (const GemmShape& s : shapes)
    out.push_back(entry_of_distinct[size_t(std::find(distinct.begin(), distinct.end(), s) - distinct.begin())]);
  return out;
}

// A measured peak is the best of the square GEMM and of every measured shape
// (a shape that fits in cache can beat the square); efficiencies follow it.
void finalize_peaks(GemmEfficiencyTable& t, const GemmRunOptions& o) {
  for (GemmDType d : o.dtypes) {
    const double given = d == GemmDType::kF32 ? o.peak_f32 : o.peak_bf16;
    double& peak = t.peak_gflops.at(gemm_dtype_name(d));
    if (given <= 0)
      for (const GemmTableEntry& e : t.entries)
        if (e.dtype == d) peak = std::max(peak, e.gflops);
    const double balance = t.membw_gbps > 0 ? peak / t.membw_gbps : 0;
    for (GemmTableEntry& e : t.entries) {
      if (e.dtype != d) continue;
      e.efficiency = e.gflops / peak;
      e.memory_bound = e.intensity < balance;
    }
  }
}

}  // namespace

GemmEfficiencyTable run_gemm_shapes(const std::vector<GemmShape>& shapes, const GemmRunOptions& o,
                                    const GemmStart& on_start, const GemmProgress& on_entry) {
  ZAYA_CHECK(!shapes.empty(), "no GEMM shapes to measure");
  ZAYA_CHECK(!o.dtypes.empty(), "no GEMM data type to measure");
  GemmEfficiencyTable t = start_table(o);
  if (on_start) on_start(t);
  for (GemmDType d : o.dtypes) measure(t, d, shapes, o, on_entry);
  finalize_peaks(t, o);
  return t;
}

GemmEfficiencyTable run_gemm_model(const ZayaConfig& c, const std::string& name, const ModelGemmOptions& m,
                                   const GemmRunOptions& o, const GemmStart& on_start, const GemmProgress& on_entry) {
  const std::vector<ModelGemm> gemms = model_gemms(c, m);
  GemmEfficiencyTable t = start_table(o);
  t.model = name;
  t.micro_batch = m.micro_batch;
  t.seq_len = m.seq_len;
  t.ep = m.ep;
  t.skip_fraction = m.skip_fraction;
  t.expert_tokens = expected_expert_tokens(c, m);
  if (on_start) on_start(t);
  std::vector<GemmShape> shapes;
  for (const ModelGemm& g : gemms) shapes.push_back(g.shape);
  for (GemmDType d : o.dtypes) {
    const std::vector<int> entry = measure(t, d, shapes, o, on_entry);
    for (size_t i = 0; i < gemms.size(); ++i)
      t.model_gemms.push_back(
          {gemms[i].name, gemms[i].phase, d, gemms[i].shape, gemms[i].count, gemms[i].approximate, entry[i]});
  }
  finalize_peaks(t, o);
  return t;
}

ZayaConfig load_model_config(const std::string& spec) {
  for (const std::string& p : preset_names())
    if (spec == p) return preset_config(spec);
  std::filesystem::path path(spec);
  if (std::filesystem::is_directory(path)) path /= "config.json";
  ZAYA_CHECK(std::filesystem::exists(path),
             "--model '{}' is neither a preset ({}) nor a config.json or model directory", spec,
             fmt::format("{}", fmt::join(preset_names(), ", ")));
  return load_hf_config(path.string());
}

}  // namespace zaya
