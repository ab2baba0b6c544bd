#pragma once
// The GEMM efficiency table that `zaya bench gemm --json` writes and the
// planner ([plan]: step-time estimates) reads: measured throughput per
// (dtype, layout, M, N, K) against the measured peak, and optionally a model's
// GEMM list pointing into it. Format ("zaya.gemm_efficiency", version 1) in
// docs/bench.md; this class is the reference reader.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "zaya/bench/gemm_bench.h"
#include "zaya/bench/gemm_shapes.h"

namespace zaya {

struct GemmTableEntry {
  GemmDType dtype = GemmDType::kF32;
  GemmShape shape;
  double gflops = 0;
  double efficiency = 0;  // gflops / peak of the dtype
  double seconds = 0;     // fastest call
  double median_seconds = 0;
  int calls = 0;
  double intensity = 0;  // FLOP / byte
  bool memory_bound = false;
  bool falls_off = false;
  std::string falloff_reason;
  bool has_padded = false;
  GemmShape padded;
  double padded_seconds = 0;
};

struct GemmModelEntry {
  std::string name, phase;
  GemmDType dtype = GemmDType::kF32;
  GemmShape shape;
  double count = 0;
  bool approximate = false;
  int entry = -1;  // index into entries
};

class GemmEfficiencyTable {
 public:
  std::map<std::string, double> peak_gflops;  // "f32", "bf16"
  double membw_gbps = 0;
  nlohmann::json machine = nlohmann::json::object();  // machine_json() of the run
  double min_seconds = 0;
  std::vector<GemmTableEntry> entries;
  // The model section (empty when the sweep was over M, N, K lists).
  std::string model;
  int64_t micro_batch = 0, seq_len = 0, ep = 1, expert_tokens = 0;
  double skip_fraction = 0;
  std::vector<GemmModelEntry> model_gemms;

  static GemmTableEntry entry_from(const GemmResult& r, double peak_gflops);

  nlohmann::json to_json() const;
  static GemmEfficiencyTable from_json(const nlohmann::json& j, const std::string& source);
  static GemmEfficiencyTable load(const std::string& path);

  // Efficiency of a shape: the entry with exactly that dtype, layout and
  // shape; else the nearest entry of the dtype (distance: the sum over M, N,
  // K of |log(ratio)|, a different layout counting as one extra doubling).
  // Throws when the table has no entry of the dtype.
  double efficiency(GemmDType dtype, const GemmShape& shape) const;
  // 2MNK / (efficiency * peak).
  double estimate_seconds(GemmDType dtype, const GemmShape& shape) const;
};

}  // namespace zaya
