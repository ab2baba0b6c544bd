#include "zaya/plan/gemm_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "zaya/bench/gemm_bench.h"
#include "zaya/core/error.h"

namespace zaya {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

double shape_distance(const GemmShape& a, const GemmShape& b) {
  double d = std::abs(std::log(double(a.m) / double(b.m))) + std::abs(std::log(double(a.n) / double(b.n))) +
             std::abs(std::log(double(a.k) / double(b.k)));
  if (a.trans_a != b.trans_a || a.trans_b != b.trans_b) d += std::log(2.0);
  return d;
}

}  // namespace

GemmModel::GemmModel(const HardwareProfile& profile, std::vector<GemmEfficiencyTable> extra)
    : profile_(profile), tables_(std::move(extra)) {
  if (profile.gemm_table) tables_.push_back(*profile.gemm_table);
}

bool GemmModel::has_measurements(const std::string& dtype) const {
  const GemmDType t = parse_gemm_dtype(dtype);
  for (const GemmEfficiencyTable& tab : tables_)
    for (const GemmTableEntry& e : tab.entries)
      if (e.dtype == t && tab.peak_gflops.count(dtype) > 0) return true;
  return false;
}

GemmEstimate GemmModel::analytic(const std::string& dtype, const GemmShape& s) const {
  const HardwareProfile& p = profile_;
  GemmEstimate g;
  // Skinny GEMMs get smaller tiles (the next power of two >= 16 below the
  // full tile), which reuse less data: their throughput scales with the
  // square root of the tile area (an estimate; measure with zaya bench gemm).
  auto tile_for = [](int64_t dim, int64_t tile) {
    int64_t t = 16;
    while (t < dim && t < tile) t *= 2;
    return std::min(t, tile);
  };
  const int64_t tm = tile_for(s.m, p.tile_m), tn = tile_for(s.n, p.tile_n);
  const double reuse = std::sqrt(double(tm * tn) / double(p.tile_m * p.tile_n));
  const int64_t tiles_m = ceil_div(s.m, tm), tiles_n = ceil_div(s.n, tn);
  g.tile_efficiency = double(s.m * s.n) / double(tiles_m * tm * tiles_n * tn) * reuse;
  // Too few tiles to fill the machine: libraries split K (slices of >= 256).
  const int64_t splits = std::max<int64_t>(1, std::min(p.compute_units / (tiles_m * tiles_n), s.k / 256));
  const int64_t tiles = tiles_m * tiles_n * splits;
  const int64_t waves = ceil_div(tiles, p.compute_units);
  g.wave_efficiency = double(tiles) / double(waves * p.compute_units);
  const double k_eff = double(s.k) / double(ceil_div(s.k, p.align) * p.align);
  const double peak = p.peak_gflops(dtype) * 1e9;
  const double compute = s.flops() / (peak * p.gemm_efficiency.value * g.tile_efficiency * g.wave_efficiency * k_eff);
  const double memory = gemm_bytes(parse_gemm_dtype(dtype), s) / (p.membw_gbps.value * 1e9);
  g.memory_bound = memory > compute;
  g.seconds = std::max(compute,
                       memory);  // launches are counted by the callers (per kernel, not per GEMM)
  g.efficiency = s.flops() / g.seconds / peak;
  g.basis = "model";
  return g;
}

GemmEstimate GemmModel::estimate(const std::string& dtype, const GemmShape& s) const {
  const GemmDType t = parse_gemm_dtype(dtype);
  const GemmTableEntry* best = nullptr;
  const GemmEfficiencyTable* best_table = nullptr;
  double best_d = std::numeric_limits<double>::infinity();
  for (const GemmEfficiencyTable& tab : tables_) {
    if (tab.peak_gflops.count(dtype) == 0) continue;
    for (const GemmTableEntry& e : tab.entries) {
      if (e.dtype != t || e.efficiency <= 0) continue;
      const double d = shape_distance(e.shape, s);
      if (d < best_d) {
        best_d = d;
        best = &e;
        best_table = &tab;
      }
    }
  }
  if (best == nullptr) return analytic(dtype, s);
  GemmEstimate g;
  const double table_peak = best_table->peak_gflops.at(dtype) * 1e9;
  g.seconds = s.flops() / (best->efficiency * table_peak);
  // A training step is a sum of typical calls, not of the luckiest ones: on a
  // shared machine the median is the honest statistic (on a quiet one they
  // agree).
  if (best->median_seconds > best->seconds && best->seconds > 0) g.seconds *= best->median_seconds / best->seconds;
  g.efficiency = s.flops() / g.seconds / (profile_.peak_gflops(dtype) * 1e9);
  g.memory_bound = best->memory_bound;
  g.basis = best_d == 0 ? "measured"
                        : fmt::format("nearest measured {}x{}x{} {}", best->shape.m, best->shape.n, best->shape.k,
                                      best->shape.layout());
  return g;
}

}  // namespace zaya
