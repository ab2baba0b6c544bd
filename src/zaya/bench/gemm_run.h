#pragma once
// A whole `zaya bench gemm` run: peaks, then every shape (a sweep or a
// model's GEMMs) for every dtype, each judged against the peak, the roofline
// and its padded neighbour, into a GemmEfficiencyTable.

#include <functional>
#include <string>
#include <vector>

#include "zaya/bench/gemm_bench.h"
#include "zaya/bench/gemm_shapes.h"
#include "zaya/bench/gemm_table.h"
#include "zaya/model/config.h"

namespace zaya {

struct GemmRunOptions {
  std::vector<GemmDType> dtypes = {GemmDType::kF32, GemmDType::kBF16};
  GemmTimingOptions timing;
  int64_t align = 0;                   // > 0: also time each unaligned shape padded to multiples of this
  double falloff = 0.85;               // mark_falloffs threshold
  double peak_f32 = 0, peak_bf16 = 0;  // GFLOP/s; 0: measure
  int64_t peak_side_f32 = 2048, peak_side_bf16 = 4096;
  double membw_gbps = 0;                // DRAM bandwidth for the roofline; 0: measure (STREAM triad)
  double max_bytes = 8.0 * (1u << 30);  // skip shapes whose operands exceed this
};

// Called after each measured (or skipped) shape, for progress displays;
// `entry` is null for a skipped shape. Efficiencies are final only in the
// returned table (a measured peak is raised to the best shape seen).
using GemmProgress = std::function<void(GemmDType dtype, const GemmShape& shape, const GemmTableEntry* entry)>;
// Called once the peaks and bandwidth are known, before the shapes.
using GemmStart = std::function<void(const GemmEfficiencyTable& table)>;

GemmEfficiencyTable run_gemm_shapes(const std::vector<GemmShape>& shapes, const GemmRunOptions& options,
                                    const GemmStart& on_start = {}, const GemmProgress& on_entry = {});

GemmEfficiencyTable run_gemm_model(const ZayaConfig& config, const std::string& name, const ModelGemmOptions& model,
                                   const GemmRunOptions& options, const GemmStart& on_start = {},
                                   const GemmProgress& on_entry = {});

// A preset name, a config.json, or a directory holding one.
ZayaConfig load_model_config(const std::string& spec);

}  // namespace zaya
