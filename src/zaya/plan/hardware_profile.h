#pragma once
// A hardware profile: what the planner ([plan], docs/plan.md) knows about one
// accelerator (or CPU rank) and the network between them. Every figure says
// where it came from: "vendor" (a datasheet peak), "measured" (`zaya profile
// measure` on the machine) or "estimate" (derived, e.g. an achievable share of
// a vendor peak). JSON format "zaya.hardware_profile", version 1, documented in
// docs/plan.md; load() names the file and the field of any bad value.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "zaya/bench/gemm_table.h"

namespace zaya {

// A number and its provenance.
struct Figure {
  double value = 0;
  std::string source = "estimate";  // vendor | measured | estimate
  std::string note;                 // e.g. the datasheet or the command that measured it
};

// Bus bandwidth (nccl-tests' busbw) of one collective over message sizes, for
// one group size. scope: "intra" (inside a node), "inter" (across nodes).
struct CommCurvePoint {
  double bytes = 0;  // nccl-tests' size column
  double busbw_gbps = 0;
};
struct CommCurve {
  std::string collective;  // all_reduce, reduce_scatter, all_gather, all_to_all,
                           // broadcast
  int ranks = 2;
  std::string scope = "intra";
  std::string source = "estimate";
  std::vector<CommCurvePoint> points;  // ascending bytes
};

struct HardwareProfile {
  std::string name;
  std::string description;
  std::string device_kind = "gpu";  // gpu | cpu
  // One device (a GPU, or one CPU rank with its threads).
  Figure peak_f32_gflops, peak_bf16_gflops;  // dense GEMM peak
  Figure membw_gbps;                         // device memory bandwidth
  Figure memory_gib;                         // device memory capacity
  Figure gemm_efficiency;                    // share of peak a large aligned GEMM reaches (no
                                             // table entry)
  Figure stream_gbps;                        // what bandwidth-bound ops (norms, element-wise) reach
  Figure exp_per_second;                     // transcendental rate of the non-GEMM ops (0: not a
                                             // limit)
  Figure op_overhead_us;                     // fixed cost per op launch (kernel launch, parallel
                                             // region)
  int64_t compute_units = 1;                 // CUs / SMs / cores: wave quantization
  int64_t tile_m = 1, tile_n = 1;            // GEMM output tile: tile quantization
  int64_t align = 64;                        // dimension multiple the GEMM kernels want
  // Cluster.
  int64_t devices_per_node = 1;
  int64_t max_devices = 1;
  // How the measured figures were taken (a measured profile): ranks that ran
  // at once on this node, threads per rank.
  int64_t ranks_measured = 1, threads_per_rank = 0;
  std::vector<CommCurve> comm;
  std::optional<GemmEfficiencyTable> gemm_table;  // measured GEMM efficiencies

  double peak_gflops(const std::string& dtype) const;  // "f32" or "bf16"

  nlohmann::json to_json() const;
  // `source` names the file in messages.
  static HardwareProfile from_json(const nlohmann::json& j, const std::string& source);
  static HardwareProfile load(const std::string& path);
  void save(const std::string& path) const;
  // Checks ranges (positive peaks, sorted curves, ...); throws naming `source`
  // and the field.
  void validate(const std::string& source) const;
};

// A built-in profile by name, or a profile file (a path ending in .json).
HardwareProfile resolve_profile(const std::string& name_or_path);

}  // namespace zaya
