#include "zaya/plan/builtin_profiles.h"

#include <cmath>

namespace zaya {
namespace {

Figure vendor(double v, const char* note) { return {v, "vendor", note}; }
Figure estimate(double v, const char* note) { return {v, "estimate", note}; }

// Curves for every collective the planner uses: one node (intra) and 2 .. 128
// nodes (inter). Inter-node busbw is bounded by one NIC per GPU (rails);
// all-to-all crosses rails through the node's own fabric and reaches less.
void add_curves(HardwareProfile& p, double intra_gbps, double inter_gbps, double a2a_inter_gbps) {
  const int64_t node = p.devices_per_node;
  for (const char* c : {"all_reduce", "reduce_scatter", "all_gather", "all_to_all"}) {
    p.comm.push_back(alpha_beta_curve(c, int(node), "intra", intra_gbps, 8.0 * (1 << 20)));
    for (int64_t n = 2 * node; n <= p.max_devices; n *= 4) {
      const double peak = std::string(c) == "all_to_all" ? a2a_inter_gbps : inter_gbps;
      p.comm.push_back(alpha_beta_curve(c, int(n), "inter", peak, 4.0 * (1 << 20) * std::log2(double(n))));
    }
  }
}

HardwareProfile mi300x() {
  HardwareProfile p;
  p.name = "mi300x-pollara";
  p.description =
      "AMD Instinct MI300X (192 GB HBM3), 8 per node on Infinity "
      "Fabric, one Pensando Pollara 400 NIC per GPU, "
      "rails-only, up to 1,024 GPUs (the ZAYA1 cluster, "
      "docs/systems-notes.md 1.1)";
  p.device_kind = "gpu";
  p.peak_f32_gflops = vendor(163400, "AMD MI300X datasheet: FP32 matrix, dense");
  p.peak_bf16_gflops = vendor(1307400, "AMD MI300X datasheet: BF16 dense (no sparsity)");
  p.membw_gbps = vendor(5300, "AMD MI300X datasheet: HBM3 peak");
  p.memory_gib = vendor(178.8, "AMD MI300X datasheet: 192 GB HBM3 (= 178.8 GiB)");
  p.gemm_efficiency = estimate(0.55,
                               "large aligned bf16 GEMMs reach about 55% of the datasheet peak "
                               "(public hipBLASLt measurements); measure with `zaya bench gemm`");
  p.stream_gbps = estimate(4000, "about 75% of the HBM peak for streaming kernels");
  p.exp_per_second = estimate(0, "not a limit (softmax is fused into attention kernels)");
  p.op_overhead_us = estimate(4, "kernel launch and tail per op, partly hidden by the launch queue");
  p.compute_units = 304;  // vendor: 8 XCDs x 38 CUs
  p.tile_m = 256;         // estimate: hipBLASLt macro tile for large bf16 GEMMs
  p.tile_n = 256;
  p.align = 64;  // wavefront 64
  p.devices_per_node = 8;
  p.max_devices = 1024;
  // Intra: 7 xGMI links x ~48 GB/s usable (AMD ROCm blog) -> ~300 GB/s busbw
  // (estimate). Inter: Pollara 400 Gb/s = 50 GB/s line rate per GPU (vendor)
  // -> 45.
  add_curves(p, 300, 45, 30);
  return p;
}

HardwareProfile hopper(const char* name, double memory_gib, double membw, const char* mem_note, const char* bw_note) {
  HardwareProfile p;
  p.name = name;
  p.device_kind = "gpu";
  p.peak_f32_gflops = vendor(66900, "NVIDIA H100/H200 SXM datasheet: FP32 (non-tensor)");
  p.peak_bf16_gflops = vendor(989400, "NVIDIA H100/H200 SXM datasheet: BF16 tensor core, dense");
  p.membw_gbps = vendor(membw, bw_note);
  p.memory_gib = vendor(memory_gib, mem_note);
  p.gemm_efficiency = estimate(0.72,
                               "large aligned bf16 GEMMs reach about 70-75% of the datasheet peak "
                               "(public cuBLAS measurements); measure with `zaya bench gemm`");
  p.stream_gbps = estimate(0.8 * membw, "about 80% of the HBM peak for streaming kernels");
  p.exp_per_second = estimate(0, "not a limit (softmax is fused into attention kernels)");
  p.op_overhead_us = estimate(4, "kernel launch and tail per op, partly hidden by the launch queue");
  p.compute_units = 132;  // vendor: SXM5 SMs
  p.tile_m = 128;         // estimate: common CUTLASS/cuBLAS Hopper tile
  p.tile_n = 256;
  p.align = 64;
  p.devices_per_node = 8;
  p.max_devices = 1024;
  // Intra: NVLink 4, 450 GB/s per direction (vendor) -> ~360 GB/s busbw
  // (estimate). Inter: one 400 Gb/s ConnectX-7 per GPU = 50 GB/s line rate
  // (vendor) -> 45.
  add_curves(p, 360, 45, 35);
  return p;
}

std::vector<HardwareProfile> make_builtins() {
  std::vector<HardwareProfile> v;
  v.push_back(mi300x());
  HardwareProfile h100 = hopper("h100", 74.5, 3350, "NVIDIA H100 SXM datasheet: 80 GB HBM3 (= 74.5 GiB)",
                                "NVIDIA H100 SXM datasheet: 3.35 TB/s HBM3");
  h100.description =
      "NVIDIA H100 SXM (80 GB), 8 per node on NVLink 4, one 400 "
      "Gb/s InfiniBand NIC per GPU";
  v.push_back(h100);
  HardwareProfile h200 = hopper("h200", 131.3, 4800, "NVIDIA H200 SXM datasheet: 141 GB HBM3e (= 131.3 GiB)",
                                "NVIDIA H200 SXM datasheet: 4.8 TB/s HBM3e");
  h200.description =
      "NVIDIA H200 SXM (141 GB), 8 per node on NVLink 4, one "
      "400 Gb/s InfiniBand NIC per GPU";
  v.push_back(h200);
  for (HardwareProfile& p : v) p.validate("built-in profile " + p.name);
  return v;
}

}  // namespace

CommCurve alpha_beta_curve(const std::string& collective, int ranks, const std::string& scope, double peak_gbps,
                           double half_bytes) {
  CommCurve c;
  c.collective = collective;
  c.ranks = ranks;
  c.scope = scope;
  c.source = "estimate";
  for (double s = 4096; s <= 4.0 * (1 << 30) + 1; s *= 4) c.points.push_back({s, peak_gbps * s / (s + half_bytes)});
  return c;
}

const std::vector<HardwareProfile>& builtin_profiles() {
  static const std::vector<HardwareProfile> profiles = make_builtins();
  return profiles;
}

const HardwareProfile* find_builtin_profile(const std::string& name) {
  for (const HardwareProfile& p : builtin_profiles())
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace zaya
